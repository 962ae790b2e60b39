// Keys and keyrings (FORMAT.md §1, docs/KEYRING.md), and the compact form
// for one environment variable or Worker secret binding.
import { base64DecodeStd, utf8 } from './bytes.js';
import { ReqstateError } from './errors.js';
import { macOf, primitives, type Mac } from './primitives.js';

export type Algorithm = 'hmac-sha256' | 'xchacha20-poly1305';
export type KeyStatus = 'primary' | 'active' | 'retired';

/** Algorithm identifiers of the token header (FORMAT.md §3). */
export const ALGORITHM_IDS: Record<Algorithm, 1 | 2> = { 'hmac-sha256': 1, 'xchacha20-poly1305': 2 };

const SALT = utf8('reqstate/v1 keyring');
const NONCE_INFO = utf8('reqstate/v1 xchacha20-poly1305 nonce\x01');


/** The keys a secret derives (FORMAT.md §1), computed on first use. */
interface Derived {
  workingKey: Uint8Array;
  nonceKey: Uint8Array | undefined;
  mac: Mac;
}

/** A key given by its parts; `secret` is raw bytes or standard base64. */
export interface KeySpec {
  id: number;
  status: KeyStatus;
  algorithm?: Algorithm;
  secret: Uint8Array | string;
  created?: string;
  /**
   * The instant, unix seconds, from which the key mints (docs/KEYRING.md,
   * "Keys on a schedule"); before it, the key only verifies. Only on an
   * `active` key.
   */
  mintFrom?: number;
  /**
   * The instant, unix seconds, from which the key's tokens are refused
   * (`retired_key`). Not on a `retired` key.
   */
  retireAt?: number;
}

/** The latest instant a keyring can write (TOML and RFC 3339 years stop at 9999). */
export const MAX_INSTANT = 253402300799;

/** A scheduled change of a keyring: a key starts minting (`mint_from`) or retires (`retire_at`). */
export interface Transition {
  /** Unix seconds. */
  at: number;
  keyId: number;
  kind: 'starts_minting' | 'retires';
}

/** What a keyring's schedule is checked against: the longest lifetime and the leeway it serves (a {@link Policy}). */
export interface SchedulePolicy {
  readonly maxLifetime: number;
  readonly clockLeeway: number;
}

/** An instant as KEYRING.md writes it: RFC 3339, UTC, whole seconds (`2026-12-01T12:05:00Z`). */
export function formatInstant(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * An RFC 3339 UTC instant in whole seconds (`2026-12-01T12:05:00Z`, the
 * compact form's `mint_from` and `retire_at`) as unix seconds; `undefined`
 * for any other text, an impossible date or time, or an instant before 1970.
 */
export function parseInstant(text: string): number | undefined {
  const m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z$/.exec(text);
  if (m === null) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number);
  const days = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days[mo - 1] || h > 23 || mi > 59 || s > 59) return undefined;
  return Date.UTC(y, mo - 1, d, h, mi, s) / 1000;
}

/** A loaded key. Its material is not enumerable and never printed. */
export class Key {
  readonly id: number;
  readonly algorithm: Algorithm;
  readonly status: KeyStatus;
  readonly created: string | undefined;
  /** Unix seconds from which the key mints, if it is scheduled to (`mint_from`). */
  readonly mintFrom: number | undefined;
  /** Unix seconds from which the key's tokens are refused, if scheduled (`retire_at`). */
  readonly retireAt: number | undefined;
  /** @internal the instant its tokens are refused from: 0 if its status is retired, else retireAt, else Infinity */
  declare readonly refusedFrom: number;
  /** The secret until the keys are derived from it (then zeroed and dropped). */
  #secret: Uint8Array | undefined;
  #derived: Derived | undefined;

  constructor(id: number, algorithm: Algorithm, status: KeyStatus, secret: Uint8Array, created?: string, schedule: { mintFrom?: number; retireAt?: number } = {}) {
    this.id = id;
    this.algorithm = algorithm;
    this.status = status;
    this.created = created;
    this.mintFrom = schedule.mintFrom;
    this.retireAt = schedule.retireAt;
    // HKDF runs on the key's first use (a Worker that loads its keyring on
    // every cold start pays for the keys it uses only).
    this.#secret = secret.slice();
    Object.defineProperty(this, 'refusedFrom', { value: status === 'retired' ? 0 : (schedule.retireAt ?? Infinity), enumerable: false, writable: false, configurable: false });
  }

  /** HKDF-SHA256 (FORMAT.md §1): the working key, K_n for XChaCha keys, and the prepared HMAC. */
  #derive(): Derived {
    const secret = this.#secret!;
    // HKDF-SHA256 (RFC 5869) with one block of output: PRK = HMAC(salt, secret), T(1) = HMAC(PRK, info ‖ 0x01).
    const prk = macOf(primitives.hmacKey(SALT), secret);
    const expand = primitives.hmacKey(prk);
    const workingKey = macOf(expand, utf8(`reqstate/v1 ${this.algorithm}\x01`));
    const nonceKey = this.algorithm === 'xchacha20-poly1305' ? macOf(expand, NONCE_INFO) : undefined;
    prk.fill(0);
    secret.fill(0);
    this.#secret = undefined;
    return { workingKey, nonceKey, mac: primitives.hmacKey(nonceKey ?? workingKey) };
  }

  /** @internal the working key (FORMAT.md §1) */
  get workingKey(): Uint8Array {
    return (this.#derived ??= this.#derive()).workingKey;
  }

  /** @internal K_n, the nonce key of an XChaCha key (FORMAT.md §4.2) */
  get nonceKey(): Uint8Array | undefined {
    return (this.#derived ??= this.#derive()).nonceKey;
  }

  /** @internal HMAC-SHA256 under the working key (HMAC keys) or K_n (XChaCha keys) */
  get mac(): Mac {
    return (this.#derived ??= this.#derive()).mac;
  }

  /** Whether the key's tokens are refused at `now` (unix seconds): its status is retired, or its `retireAt` has come. */
  isRetiredAt(now: number | bigint): boolean {
    return Number(now) >= this.refusedFrom;
  }

  toJSON() {
    return {
      id: this.id,
      algorithm: this.algorithm,
      status: this.status,
      ...(this.created ? { created: this.created } : {}),
      ...(this.mintFrom !== undefined ? { mintFrom: this.mintFrom } : {}),
      ...(this.retireAt !== undefined ? { retireAt: this.retireAt } : {}),
    };
  }
}

/** How `secret_file` and `secret_env` of a TOML keyring are resolved. */
export interface KeyringSources {
  /** Reads the file named by `secret_file` (already resolved against `baseDir`). Without it, `secret_file` is refused. */
  readFile?: (path: string) => string;
  /** The environment `secret_env` names are looked up in (process.env, a Worker's `env`). Without it, `secret_env` is refused. */
  env?: Record<string, unknown>;
  /** Directory a relative `secret_file` is resolved against (the keyring file's directory). */
  baseDir?: string;
}

/** @internal */
export function bad(detail: string): never {
  throw new ReqstateError('invalid_keyring', detail);
}

/** @internal */
export const STATUSES: readonly string[] = ['primary', 'active', 'retired'];
/** @internal */
export const ALGORITHMS: readonly string[] = ['hmac-sha256', 'xchacha20-poly1305'];

/**
 * A secret's base64 as docs/KEYRING.md reads it ("How a secret is read"):
 * ASCII space, tab, CR and LF around it ignored; inside, the standard
 * alphabet only; padding absent or complete; unused bits zero.
 */
export function decodeSecret(text: string, where: string): Uint8Array {
  const secret = base64DecodeStd(text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, ''));
  if (secret === undefined) bad(`${where}: the secret is not standard base64 (the value is not shown)`);
  if (secret.length < 32) bad(`${where}: secret is ${secret.length} bytes; at least 32 random bytes are required`);
  if (secret.length > 1024) bad(`${where}: secret is ${secret.length} bytes; at most 1024 are allowed`);
  return secret;
}

/** @internal What reads a TOML keyring into key specs (src/toml.ts registers it; the compact entry has none). */
export type TomlReader = (text: string, sources: KeyringSources) => { specs: KeySpec[]; headers: readonly (number | undefined)[] | undefined };
let tomlReader: TomlReader | undefined;

/** @internal Installs the TOML reader (src/toml.ts, loaded by the package's main entry). */
export function setTomlReader(reader: TomlReader): void {
  tomlReader = reader;
}

/**
 * A set of keys: exactly one primary; ids unique; and, if keys carry
 * `mintFrom`/`retireAt`, the schedule that hands minting from one key to the
 * next (docs/KEYRING.md, "Keys on a schedule"). Immutable: which key mints
 * and which keys' tokens are refused is a pure function of the keyring and
 * the instant ({@link Keyring.mintingKey}, {@link Key.isRetiredAt}), so a
 * scheduled takeover or retirement needs no new keyring.
 */
export class Keyring {
  readonly keys: readonly Key[];
  /** The key whose status is primary: it mints until the first scheduled key takes over ({@link Keyring.mintingKey}). */
  readonly primary: Key;
  /** The mint order: the primary, then the keys with a `mintFrom` by increasing `mintFrom`. */
  readonly mintOrder: readonly Key[];
  private readonly byId: Map<number, Key>;
  /** The scheduled keys' `mintFrom`, increasing (the timeline {@link Keyring.mintingKey} searches). */
  private readonly mintAt: readonly number[];
  /** The line of each key in its TOML file, for error messages. */
  private readonly lines: ReadonlyMap<Key, number>;

  private constructor(keys: Key[], lines: ReadonlyMap<Key, number> = new Map()) {
    if (keys.length === 0) bad('no key at all; at least one [[key]] is required');
    this.lines = lines;
    const at = (k: Key) => `${lines.has(k) ? `line ${lines.get(k)}: ` : ''}key ${k.id}`;
    this.byId = new Map();
    for (const k of keys) {
      const first = this.byId.get(k.id);
      if (first !== undefined) bad(`${at(k)}: duplicate key id${lines.has(first) ? ` (first defined on line ${lines.get(first)})` : ''}`);
      this.byId.set(k.id, k);
      if (k.mintFrom !== undefined && k.status !== 'active') {
        bad(`${at(k)}: \`mint_from\` is for a key with status = "active" (one that verifies until it starts minting), not "${k.status}"`);
      }
      if (k.retireAt !== undefined && k.status === 'retired') bad(`${at(k)}: \`retire_at\` on a key with status = "retired": it is retired already; remove one of the two`);
    }
    const primaries = keys.filter((k) => k.status === 'primary');
    if (primaries.length !== 1) bad(`${primaries.length === 0 ? 'no primary key' : 'more than one primary key'}; exactly one key must have status = "primary"`);
    this.keys = Object.freeze(keys.slice());
    this.primary = primaries[0];
    const scheduled = keys.filter((k) => k.mintFrom !== undefined).sort((a, b) => a.mintFrom! - b.mintFrom! || a.id - b.id);
    for (let i = 1; i < scheduled.length; i++) {
      const [first, second] = [scheduled[i - 1], scheduled[i]];
      if (first.mintFrom === second.mintFrom) {
        bad(`${at(second)}: mint_from ${formatInstant(second.mintFrom!)} is also key ${first.id}'s${lines.has(first) ? ` (line ${lines.get(first)})` : ''}: two keys cannot start minting at the same instant`);
      }
    }
    this.mintOrder = Object.freeze([this.primary, ...scheduled]);
    this.mintAt = Object.freeze(scheduled.map((k) => k.mintFrom!));
    // Every instant has a minting key that is not retired.
    this.mintOrder.forEach((k, i) => {
      if (k.retireAt === undefined) return;
      const next = this.mintOrder[i + 1];
      if (next === undefined) {
        bad(`${at(k)}: retire_at ${formatInstant(k.retireAt)}: key ${k.id} is the last key to mint, so no key would mint from then; schedule a successor first (reqstate keys rotate)`);
      }
      if (k.retireAt < next.mintFrom!) {
        bad(`${at(k)}: retire_at ${formatInstant(k.retireAt)} comes before key ${next.id} takes over (mint_from ${formatInstant(next.mintFrom!)}): no key would mint in between`);
      }
    });
  }

  get(id: number): Key | undefined {
    return this.byId.get(id);
  }

  /**
   * The key that mints at `now` (unix seconds): the last key of the mint
   * order whose `mintFrom` has come (the primary before any). The keyring
   * made sure it is not retired then.
   */
  mintingKey(now: number | bigint): Key {
    const at = this.mintAt;
    if (at.length === 0) return this.primary;
    const t = Number(now);
    // The number of scheduled keys whose mintFrom is at or before t.
    let lo = 0;
    let hi = at.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (at[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return this.mintOrder[lo];
  }

  /** What `key` does at `now`: `primary` if it mints, `retired` if its tokens are refused, `active` if it verifies only. */
  statusAt(key: Key, now: number | bigint): KeyStatus {
    if (key.isRetiredAt(now)) return 'retired';
    return this.mintingKey(now).id === key.id ? 'primary' : 'active';
  }

  /** Every scheduled instant, in order: keys starting to mint and keys retiring (a retirement after a takeover at the same instant). */
  transitions(): Transition[] {
    const all: Transition[] = [
      ...this.mintOrder.slice(1).map((k): Transition => ({ at: k.mintFrom!, keyId: k.id, kind: 'starts_minting' })),
      ...this.keys.filter((k) => k.retireAt !== undefined).map((k): Transition => ({ at: k.retireAt!, keyId: k.id, kind: 'retires' })),
    ];
    return all.sort((a, b) => a.at - b.at || Number(a.kind === 'retires') - Number(b.kind === 'retires') || a.keyId - b.keyId);
  }

  /** The first transition strictly after `now`, if any. */
  nextTransition(now: number | bigint): Transition | undefined {
    const t = Number(now);
    return this.transitions().find((x) => x.at > t);
  }

  /**
   * Checks that no scheduled retirement refuses a token while it is live
   * under `policy` (docs/KEYRING.md, "Keys on a schedule"): a key that mints
   * until its successor takes over at `S` minted tokens accepted until
   * `S + maxLifetime + clockLeeway`, so its `retireAt` must be at least that.
   * Throws `invalid_keyring` naming the line, the key and the instants.
   * {@link Codec} calls it with its policy; a key retired by its status is
   * not checked (that is the emergency brake).
   */
  checkSchedule(policy: SchedulePolicy): void {
    const order = this.mintOrder;
    for (let i = 0; i + 1 < order.length; i++) {
      const key = order[i];
      const next = order[i + 1];
      if (key.retireAt === undefined) continue;
      const takeover = next.mintFrom!;
      const safe = takeover + policy.maxLifetime + policy.clockLeeway;
      if (key.retireAt < safe) {
        const line = this.lines.get(key);
        bad(
          `${line !== undefined ? `line ${line}: ` : ''}key ${key.id}: retire_at ${formatInstant(key.retireAt)} refuses live tokens: ` +
            `key ${key.id} mints until key ${next.id} takes over at ${formatInstant(takeover)}, and its last tokens are accepted until ${formatInstant(safe)} ` +
            `(max lifetime ${policy.maxLifetime} s + clock leeway ${policy.clockLeeway} s); retire it at ${formatInstant(safe)} or later`,
        );
      }
    }
  }

  /** Builds a keyring from key specs (`invalid_keyring` on any problem; all or nothing). */
  static fromKeys(specs: readonly KeySpec[]): Keyring {
    return Keyring.build(specs);
  }

  private static build(specs: readonly KeySpec[], lines?: readonly (number | undefined)[]): Keyring {
    if (!Array.isArray(specs)) bad('keys must be an array');
    const where = new Map<Key, number>();
    const keys = specs.map((s, i) => {
      const line = lines?.[i];
      const at = `${line !== undefined ? `line ${line}: ` : ''}key ${typeof s?.id === 'number' ? s.id : `#${i + 1}`}`;
      if (!Number.isInteger(s.id) || s.id < 0 || s.id > 0xffffffff) bad(`${at}: id must be an integer in 0..=4294967295`);
      if (!STATUSES.includes(s.status)) bad(`${at}: unknown status (the value is not shown); expected "primary", "active" or "retired"`);
      const algorithm = s.algorithm ?? 'xchacha20-poly1305';
      if (!ALGORITHMS.includes(algorithm)) bad(`${at}: unknown algorithm (the value is not shown); expected "xchacha20-poly1305" or "hmac-sha256"`);
      for (const [name, v] of [['mintFrom', s.mintFrom], ['retireAt', s.retireAt]] as const) {
        if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > MAX_INSTANT)) bad(`${at}: ${name} must be unix seconds, an integer in 0..=${MAX_INSTANT} (1970 to 9999)`);
      }
      let secret: Uint8Array;
      if (typeof s.secret === 'string') secret = decodeSecret(s.secret, at);
      else if (s.secret instanceof Uint8Array) {
        if (s.secret.length < 32 || s.secret.length > 1024) bad(`${at}: secret is ${s.secret.length} bytes; 32 to 1024 are required`);
        secret = s.secret;
      } else bad(`${at}: secret must be bytes or base64 text`);
      const key = new Key(s.id, algorithm, s.status, secret, s.created, { mintFrom: s.mintFrom, retireAt: s.retireAt });
      if (line !== undefined) where.set(key, line);
      return key;
    });
    return new Keyring(keys, where);
  }

  /**
   * The TOML keyring of docs/KEYRING.md. `secret` inline always works;
   * `secret_file` and `secret_env` only with the matching `sources`
   * (refused with a clear `invalid_keyring` otherwise, e.g. in a Worker).
   * `mint_from` and `retire_at` are read as "Keys on a schedule" says; the
   * schedule against a policy is checked by {@link Keyring.checkSchedule}
   * (a {@link Codec} does it when it is built).
   */
  static fromToml(text: string, sources: KeyringSources = {}): Keyring {
    if (tomlReader === undefined) {
      bad('a TOML keyring needs the TOML reader: import from "@reqstate/codec" (not "@reqstate/codec/compact"), or give the keyring in the compact form');
    }
    const { specs, headers } = tomlReader(text, sources);
    return Keyring.build(specs, headers);
  }

  /**
   * The compact form, for one environment variable or Worker secret:
   * entries separated by commas (and/or whitespace), each
   * `ID:STATUS:SECRET` or `ID:STATUS:ALGORITHM:SECRET`, SECRET in standard
   * base64 (padding optional), ALGORITHM `xchacha20-poly1305` (default) or
   * `hmac-sha256`, optionally followed by `;mint_from=INSTANT` and/or
   * `;retire_at=INSTANT` (RFC 3339 UTC, whole seconds:
   * `2026-12-01T12:05:00Z`). Example: `2:primary:q8V…=,1:active:hmac-sha256:Zm9…=`.
   */
  static fromCompact(text: string): Keyring {
    const entries = text.split(/[\s,]+/).filter((e) => e !== '');
    return Keyring.build(
      entries.map((entry, i) => {
        const [head, ...schedule] = entry.split(';');
        const parts = head.split(':');
        const where = `entry #${i + 1}`;
        if (parts.length !== 3 && parts.length !== 4) bad(`${where}: expected ID:STATUS:SECRET or ID:STATUS:ALGORITHM:SECRET (the value is not shown)`);
        if (!/^(0|[1-9][0-9]{0,9})$/.test(parts[0]) || Number(parts[0]) > 0xffffffff) bad(`${where}: the id must be an integer in 0..=4294967295`);
        const status = parts[1];
        if (!STATUSES.includes(status)) bad(`key ${parts[0]}: unknown status (the value is not shown); expected primary, active or retired`);
        const algorithm = parts.length === 4 ? parts[2] : 'xchacha20-poly1305';
        if (!ALGORITHMS.includes(algorithm)) bad(`key ${parts[0]}: unknown algorithm (the value is not shown); expected xchacha20-poly1305 or hmac-sha256`);
        const instants: { mint_from?: number; retire_at?: number } = {};
        for (const item of schedule) {
          const eq = item.indexOf('=');
          const name = eq < 0 ? item : item.slice(0, eq);
          if (name !== 'mint_from' && name !== 'retire_at') bad(`key ${parts[0]}: unknown field ${showName(name)} after \`;\`; expected mint_from=INSTANT or retire_at=INSTANT`);
          if (instants[name] !== undefined) bad(`key ${parts[0]}: ${name} is given twice`);
          const at = eq < 0 ? undefined : parseInstant(item.slice(eq + 1));
          if (at === undefined) bad(`key ${parts[0]}: ${name} must be an RFC 3339 UTC instant in whole seconds from 1970, such as 2026-12-01T12:05:00Z (the value is not shown)`);
          instants[name] = at;
        }
        return {
          id: Number(parts[0]),
          status: status as KeyStatus,
          algorithm: algorithm as Algorithm,
          secret: decodeSecret(parts[parts.length - 1], `key ${parts[0]}`),
          mintFrom: instants.mint_from,
          retireAt: instants.retire_at,
        };
      }),
    );
  }

  /** TOML (text that does not start with a digit) or the compact form (text that does). */
  static parse(text: string, sources: KeyringSources = {}): Keyring {
    if (typeof text !== 'string') bad('a keyring must be given as text (TOML or the compact form)');
    return /^\s*[0-9]/.test(text) ? Keyring.fromCompact(text) : Keyring.fromToml(text, sources);
  }

  /**
   * The compact form of key specs (the inverse of {@link Keyring.fromCompact}),
   * `mintFrom` and `retireAt` (unix seconds) written as `;mint_from=…` and
   * `;retire_at=…`. Checks the keyring it writes (`invalid_keyring`), so
   * what it returns loads.
   */
  static toCompact(specs: readonly { id: number; status: KeyStatus; algorithm?: Algorithm; secret: string; mintFrom?: number; retireAt?: number }[]): string {
    Keyring.build(specs);
    return specs
      .map((s) => {
        let entry = `${s.id}:${s.status}:${s.algorithm ?? 'xchacha20-poly1305'}:${s.secret.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '')}`;
        if (s.mintFrom !== undefined) entry += `;mint_from=${formatInstant(s.mintFrom)}`;
        if (s.retireAt !== undefined) entry += `;retire_at=${formatInstant(s.retireAt)}`;
        return entry;
      })
      .join(',');
  }
}

/** The fields of a `[[key]]` table, in the order the Rust reader lists them. */
/** @internal */
export const ENTRY_FIELDS: readonly string[] = ['id', 'algorithm', 'status', 'created', 'mint_from', 'retire_at', 'secret', 'secret_file', 'secret_env'];

/** A field or table name is shown only if it cannot be a secret (KEYRING.md). */
export function showName(name: string): string {
  return /^[A-Za-z0-9_-]{1,24}$/.test(name) ? `\`${name}\`` : '(the name is not shown)';
}
