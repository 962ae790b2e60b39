// Keys and keyrings (FORMAT.md §1, docs/KEYRING.md), and the compact form
// for one environment variable or Worker secret binding.
import { expand, extract } from '@noble/hashes/hkdf.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { parse as parseToml, TomlDate, TomlError } from 'smol-toml';
import { base64DecodeStd, utf8 } from './bytes.js';
import { ReqstateError } from './errors.js';

export type Algorithm = 'hmac-sha256' | 'xchacha20-poly1305';
export type KeyStatus = 'primary' | 'active' | 'retired';

/** Algorithm identifiers of the token header (FORMAT.md §3). */
export const ALGORITHM_IDS: Record<Algorithm, 1 | 2> = { 'hmac-sha256': 1, 'xchacha20-poly1305': 2 };

const SALT = utf8('reqstate/v1 keyring');
const NONCE_INFO = utf8('reqstate/v1 xchacha20-poly1305 nonce');

/** A key given by its parts; `secret` is raw bytes or standard base64. */
export interface KeySpec {
  id: number;
  status: KeyStatus;
  algorithm?: Algorithm;
  secret: Uint8Array | string;
  created?: string;
}

/** A loaded key. Its material is not enumerable and never printed. */
export class Key {
  readonly id: number;
  readonly algorithm: Algorithm;
  readonly status: KeyStatus;
  readonly created: string | undefined;
  /** @internal */ declare readonly workingKey: Uint8Array;
  /** @internal */ declare readonly nonceKey: Uint8Array | undefined;
  /** @internal prepared HMAC (working key for HMAC keys, K_n for XChaCha keys), cloned per use */
  declare readonly mac: ReturnType<typeof hmac.create>;

  constructor(id: number, algorithm: Algorithm, status: KeyStatus, secret: Uint8Array, created?: string) {
    this.id = id;
    this.algorithm = algorithm;
    this.status = status;
    this.created = created;
    const prk = extract(sha256, secret, SALT);
    const working = expand(sha256, prk, utf8(`reqstate/v1 ${algorithm}`), 32);
    const nonceKey = algorithm === 'xchacha20-poly1305' ? expand(sha256, prk, NONCE_INFO, 32) : undefined;
    const hidden = (value: unknown) => ({ value, enumerable: false, writable: false, configurable: false });
    Object.defineProperty(this, 'workingKey', hidden(working));
    Object.defineProperty(this, 'nonceKey', hidden(nonceKey));
    Object.defineProperty(this, 'mac', hidden(hmac.create(sha256, nonceKey ?? working)));
  }

  toJSON() {
    return { id: this.id, algorithm: this.algorithm, status: this.status, ...(this.created ? { created: this.created } : {}) };
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

function bad(detail: string): never {
  throw new ReqstateError('invalid_keyring', detail);
}

const STATUSES: readonly string[] = ['primary', 'active', 'retired'];
const ALGORITHMS: readonly string[] = ['hmac-sha256', 'xchacha20-poly1305'];

/**
 * A secret's base64 as docs/KEYRING.md reads it ("How a secret is read"):
 * ASCII space, tab, CR and LF around it ignored; inside, the standard
 * alphabet only; padding absent or complete; unused bits zero.
 */
function decodeSecret(text: string, where: string): Uint8Array {
  const secret = base64DecodeStd(text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, ''));
  if (secret === undefined) bad(`${where}: the secret is not standard base64 (the value is not shown)`);
  if (secret.length < 32) bad(`${where}: secret is ${secret.length} bytes; at least 32 random bytes are required`);
  if (secret.length > 1024) bad(`${where}: secret is ${secret.length} bytes; at most 1024 are allowed`);
  return secret;
}

/** A set of keys: exactly one primary; ids unique. Immutable. */
export class Keyring {
  readonly keys: readonly Key[];
  readonly primary: Key;
  private readonly byId: Map<number, Key>;

  private constructor(keys: Key[]) {
    if (keys.length === 0) bad('no key at all; at least one [[key]] is required');
    this.byId = new Map();
    for (const k of keys) {
      if (this.byId.has(k.id)) bad(`key ${k.id}: duplicate key id`);
      this.byId.set(k.id, k);
    }
    const primaries = keys.filter((k) => k.status === 'primary');
    if (primaries.length !== 1) bad(`${primaries.length === 0 ? 'no primary key' : 'more than one primary key'}; exactly one key must have status = "primary"`);
    this.keys = Object.freeze(keys.slice());
    this.primary = primaries[0];
  }

  get(id: number): Key | undefined {
    return this.byId.get(id);
  }

  /** Builds a keyring from key specs (`invalid_keyring` on any problem; all or nothing). */
  static fromKeys(specs: readonly KeySpec[]): Keyring {
    if (!Array.isArray(specs)) bad('keys must be an array');
    return new Keyring(
      specs.map((s, i) => {
        const where = `key ${typeof s?.id === 'number' ? s.id : `#${i + 1}`}`;
        if (!Number.isInteger(s.id) || s.id < 0 || s.id > 0xffffffff) bad(`${where}: id must be an integer in 0..=4294967295`);
        if (!STATUSES.includes(s.status)) bad(`${where}: unknown status (the value is not shown); expected "primary", "active" or "retired"`);
        const algorithm = s.algorithm ?? 'xchacha20-poly1305';
        if (!ALGORITHMS.includes(algorithm)) bad(`${where}: unknown algorithm (the value is not shown); expected "xchacha20-poly1305" or "hmac-sha256"`);
        let secret: Uint8Array;
        if (typeof s.secret === 'string') secret = decodeSecret(s.secret, where);
        else if (s.secret instanceof Uint8Array) {
          if (s.secret.length < 32 || s.secret.length > 1024) bad(`${where}: secret is ${s.secret.length} bytes; 32 to 1024 are required`);
          secret = s.secret;
        } else bad(`${where}: secret must be bytes or base64 text`);
        return new Key(s.id, algorithm, s.status, secret, s.created);
      }),
    );
  }

  /**
   * The TOML keyring of docs/KEYRING.md. `secret` inline always works;
   * `secret_file` and `secret_env` only with the matching `sources`
   * (refused with a clear `invalid_keyring` otherwise, e.g. in a Worker).
   */
  static fromToml(text: string, sources: KeyringSources = {}): Keyring {
    let doc: Record<string, unknown>;
    try {
      doc = parseToml(text, { integersAsBigInt: true }) as Record<string, unknown>;
    } catch (e) {
      const line = e instanceof TomlError ? `line ${e.line}: ` : '';
      // The parser's message quotes the offending text; only its first line (the description) is kept.
      bad(`${line}not valid TOML: ${String((e as Error).message).split('\n')[0].replace(/^Invalid TOML document: /, '')}`);
    }
    for (const k of Object.keys(doc)) {
      if (k !== 'version' && k !== 'key') bad(`unknown top-level field ${showName(k)}`);
    }
    if (doc.version !== undefined && doc.version !== 1n) {
      bad(typeof doc.version === 'bigint' ? `unsupported keyring version ${doc.version}; this reader knows version 1` : '`version` must be the integer 1');
    }
    const tables = doc.key;
    if (tables === undefined) bad('no key at all; at least one [[key]] is required');
    if (!Array.isArray(tables)) bad('`key` must be an array of tables ([[key]])');
    const specs: KeySpec[] = tables.map((t: unknown, i: number) => {
      let where = `key #${i + 1}`;
      if (t === null || typeof t !== 'object' || Array.isArray(t)) bad(`${where}: must be a table`);
      const table = t as Record<string, unknown>;
      for (const f of Object.keys(table)) {
        if (!['id', 'algorithm', 'status', 'created', 'secret', 'secret_file', 'secret_env'].includes(f)) {
          bad(`${where}: unknown field ${showName(f)}, expected one of \`id\`, \`algorithm\`, \`status\`, \`created\`, \`secret\`, \`secret_file\`, \`secret_env\``);
        }
      }
      const id = table.id;
      if (typeof id !== 'bigint' || id < 0n || id > 0xffffffffn) {
        bad(typeof id === 'bigint' ? `${where}: \`id\` ${id} is not in 0..=4294967295` : `${where}: \`id\` must be an integer in 0..=4294967295 (the value is not shown)`);
      }
      where = `key ${id}`;
      if (table.status === undefined) bad(`${where}: \`status\` is required`);
      if (typeof table.status !== 'string' || !STATUSES.includes(table.status)) bad(`${where}: unknown status (the value is not shown); expected "primary", "active" or "retired"`);
      if (table.algorithm !== undefined && (typeof table.algorithm !== 'string' || !ALGORITHMS.includes(table.algorithm))) {
        bad(`${where}: unknown algorithm (the value is not shown); expected "xchacha20-poly1305" or "hmac-sha256"`);
      }
      let created: string | undefined;
      if (table.created !== undefined) {
        const c = table.created;
        if (!(c instanceof TomlDate) || !c.isDateTime() || c.isLocal()) bad(`${where}: \`created\` must be an offset date-time such as 2026-11-30T12:00:00Z (the value is not shown)`);
        created = c.toISOString();
      }
      const given = ['secret', 'secret_file', 'secret_env'].filter((f) => table[f] !== undefined);
      if (given.length !== 1) bad(`${where}: exactly one of secret, secret_file or secret_env must be given`);
      const field = given[0];
      const value = table[field];
      if (typeof value !== 'string') bad(`${where}: \`${field}\` must be a string (the value is not shown)`);
      let secretText: string;
      if (field === 'secret') secretText = value;
      else if (field === 'secret_env') {
        if (!sources.env) bad(`${where}: secret_env is not available here (no environment was given to the keyring loader); use secret, or pass { env }`);
        const v = sources.env[value];
        if (typeof v !== 'string') bad(`${where}: the environment variable named by secret_env is not set (the name is not shown: it could be key material)`);
        secretText = v;
      } else {
        if (!sources.readFile) bad(`${where}: secret_file is not available here (no file reader was given to the keyring loader); use secret, or pass { readFile }`);
        const path = value.startsWith('/') || !sources.baseDir ? value : `${sources.baseDir.replace(/\/+$/, '')}/${value}`;
        try {
          secretText = sources.readFile(path);
        } catch (e) {
          bad(`${where}: cannot read secret_file: ${(e as Error).message.replace(path, '<path not shown>')}`);
        }
        secretText = secretText.trim();
      }
      return {
        id: Number(id),
        status: table.status as KeyStatus,
        algorithm: (table.algorithm as Algorithm | undefined) ?? 'xchacha20-poly1305',
        secret: decodeSecret(secretText, where),
        created,
      };
    });
    return Keyring.fromKeys(specs);
  }

  /**
   * The compact form, for one environment variable or Worker secret:
   * entries separated by commas (and/or whitespace), each
   * `ID:STATUS:SECRET` or `ID:STATUS:ALGORITHM:SECRET`, SECRET in standard
   * base64 (padding optional), ALGORITHM `xchacha20-poly1305` (default) or
   * `hmac-sha256`. Example: `2:primary:q8V…=,1:active:hmac-sha256:Zm9…=`.
   */
  static fromCompact(text: string): Keyring {
    const entries = text.split(/[\s,]+/).filter((e) => e !== '');
    return Keyring.fromKeys(
      entries.map((entry, i) => {
        const parts = entry.split(':');
        const where = `entry #${i + 1}`;
        if (parts.length !== 3 && parts.length !== 4) bad(`${where}: expected ID:STATUS:SECRET or ID:STATUS:ALGORITHM:SECRET (the value is not shown)`);
        if (!/^(0|[1-9][0-9]{0,9})$/.test(parts[0]) || Number(parts[0]) > 0xffffffff) bad(`${where}: the id must be an integer in 0..=4294967295`);
        const status = parts[1];
        if (!STATUSES.includes(status)) bad(`key ${parts[0]}: unknown status (the value is not shown); expected primary, active or retired`);
        const algorithm = parts.length === 4 ? parts[2] : 'xchacha20-poly1305';
        if (!ALGORITHMS.includes(algorithm)) bad(`key ${parts[0]}: unknown algorithm (the value is not shown); expected xchacha20-poly1305 or hmac-sha256`);
        return { id: Number(parts[0]), status: status as KeyStatus, algorithm: algorithm as Algorithm, secret: decodeSecret(parts[parts.length - 1], `key ${parts[0]}`) };
      }),
    );
  }

  /** TOML (text that does not start with a digit) or the compact form (text that does). */
  static parse(text: string, sources: KeyringSources = {}): Keyring {
    if (typeof text !== 'string') bad('a keyring must be given as text (TOML or the compact form)');
    return /^\s*[0-9]/.test(text) ? Keyring.fromCompact(text) : Keyring.fromToml(text, sources);
  }

  /** The compact form of key specs (the inverse of {@link Keyring.fromCompact}). */
  static toCompact(specs: readonly { id: number; status: KeyStatus; algorithm?: Algorithm; secret: string }[]): string {
    return specs.map((s) => `${s.id}:${s.status}:${s.algorithm ?? 'xchacha20-poly1305'}:${s.secret}`).join(',');
  }
}

/** A field or table name is shown only if it cannot be a secret (KEYRING.md). */
function showName(name: string): string {
  return /^[A-Za-z0-9_-]{1,24}$/.test(name) ? `\`${name}\`` : '(the name is not shown)';
}
