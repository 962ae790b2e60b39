// @reqstate/codec/redis: a spent-token store in Redis (or Valkey) for a fleet
// of verifiers (FORMAT.md §5.1, §8 step 15), through the `redis` npm package
// (node-redis, an optional peer dependency: `npm install redis`). Kept out of
// the main entry point so that the library itself needs no Redis and runs
// anywhere.
//
// The rule every Redis store of reqstate follows (the sidecar in Rust, this
// package, the Python package: one schema, one Redis):
//
// - record name `<prefix>spent:v1:<key id>:<token id hex>`, prefix
//   `reqstate:` by default;
// - one command per consume, `SET <name> <attempt> NX GET PX <lifetime_ms>`
//   (Redis >= 7.0), `<attempt>` 16 fresh random bytes in hex; nil: recorded
//   now; `<attempt>` back: a retry of this store's own earlier attempt
//   recorded it; anything else: replayed;
// - `lifetime_ms = (expires_at + 600 - now) * 1000 + 2 * maxSkewMs`, at least
//   1000, relative to Redis's clock, so that the record outlives the token on
//   every verifier whatever its leeway (at most 600 s) while every verifier's
//   clock is within maxSkewMs of Redis's;
// - consumes are refused while the clock here and Redis's (TIME) disagree by
//   more than maxSkewMs;
// - a consume whose outcome is unknown (timed out, connection lost) is
//   refused, and its attempt remembered, so that a retry of it through the
//   same store object is accepted once if the first one was recorded.
import { toHex } from './bytes.js';
import { MAX_CLOCK_LEEWAY, ReplayStoreError, checkSpentRecord, type ReplayStore, type SpentId, type SpentRecord } from './singleuse.js';

/** The default record name prefix, the same in every implementation. */
export const DEFAULT_PREFIX = 'reqstate:';
/** Consumes remembered at most for a retry after an unknown outcome. */
export const PENDING_CAPACITY = 10_000;
const RECHECK_AFTER_MS = 30_000;
const CLOCK_STEP_MS = 100;
const MAX_LIFETIME_MS = 10n ** 15n;

/**
 * What the store needs of a client: node-redis's `sendCommand` (v4 to v6);
 * `on`/`off` (optional) let it re-measure the clocks when the client
 * reconnects (`'ready'`).
 */
export interface RedisCommandClient {
  sendCommand(args: string[]): Promise<unknown>;
  on?(event: 'ready', listener: () => void): unknown;
  off?(event: 'ready', listener: () => void): unknown;
}

/** One measurement of the clock here against Redis's `TIME`. */
export interface ClockSkewMeasurement {
  /** The clock here minus Redis's, in milliseconds: positive when the clock here is ahead. */
  skewMs: number;
  /** Half the round trip of `TIME`: the true skew is within `skewMs ± uncertaintyMs`. */
  uncertaintyMs: number;
  /** The limit (maxSkewMs). */
  maxSkewMs: number;
  /** `|skewMs| + uncertaintyMs <= maxSkewMs`: consumes are allowed. */
  withinLimit: boolean;
}

export interface RedisReplayStoreOptions {
  /** A connected node-redis client (or anything with its `sendCommand`). */
  client: RedisCommandClient;
  /** Prepended to every record name: one per deployment sharing a Redis. Default `reqstate:`. */
  prefix?: string;
  /** Deadline of one call in milliseconds (default 1000); past it the token is refused (`replay_store_unavailable`). */
  timeoutMs?: number;
  /**
   * The largest difference allowed between the clock here and Redis's, in
   * milliseconds (default 2000). Past it consumes are refused
   * (`replay_store_unavailable`). Every verifier sharing the Redis must use
   * the same value: records are kept `2 * maxSkewMs` past the token's window.
   */
  maxSkewMs?: number;
  /** Called with every measurement of the clocks (on connecting, every `clockCheckIntervalMs`, and before a consume when due). */
  onClockSkew?: (measurement: ClockSkewMeasurement) => void;
  /** The wall clock here, in milliseconds since the epoch (default `Date.now`): the one the codec's clock reads. */
  clock?: () => number;
  /** A monotonic clock in milliseconds (default `performance.now`), to see the wall clock step and measurements age. */
  monotonic?: () => number;
  /** How often the clocks are measured in the background, in milliseconds (default 10 000). */
  clockCheckIntervalMs?: number;
  /** Applied to every message built from a client's error (createRedisReplayStore hides the URL's password). */
  redact?: (message: string) => string;
  /** Closes the client (set by {@link createRedisReplayStore}). */
  close?: () => Promise<void> | void;
}

/**
 * How long a record is kept in Redis, in milliseconds, relative to Redis's
 * clock: `(expiresAt + 600 - now) * 1000 + 2 * maxSkewMs`, at least 1000.
 * `now` is the verifier's clock reading used for the verification: the record
 * outlives the token's acceptance window on every verifier, whatever its
 * leeway (at most 600 s), while every verifier's clock is within `maxSkewMs`
 * of Redis's.
 */
export function recordLifetimeMs(record: Pick<SpentRecord, 'expiresAt' | 'now'>, maxSkewMs: number): bigint {
  const ms = (record.expiresAt + BigInt(MAX_CLOCK_LEEWAY) - record.now) * 1000n + 2n * BigInt(maxSkewMs);
  return ms < 1000n ? 1000n : ms > MAX_LIFETIME_MS ? MAX_LIFETIME_MS : ms;
}

class DeadlineError extends Error {}

/** Why a client call failed: Redis answered with an error, the call never left, or nobody knows whether it ran. */
function failureKind(e: unknown): 'reply' | 'not_sent' | 'unknown' {
  for (let p = e !== null && typeof e === 'object' ? Object.getPrototypeOf(e) : null; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const name = (p.constructor as { name?: string } | undefined)?.name;
    if (name === 'ErrorReply' || name === 'ReplyError') return 'reply';
    if (name === 'ClientClosedError' || name === 'ClientOfflineError') return 'not_sent';
  }
  return 'unknown';
}

function randomAttempt(): string {
  return toHex(crypto.getRandomValues(new Uint8Array(16)));
}

function replyText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v instanceof Uint8Array) return new TextDecoder().decode(v);
  return undefined;
}

interface Measured extends ClockSkewMeasurement {
  /** monotonic() when measured */
  at: number;
  /** clock() - monotonic() when measured: a change means the wall clock stepped */
  offset: number;
}

/**
 * Spent-token records in Redis, shared by every verifier that uses the same
 * Redis and prefix (the `reqstate` sidecars included).
 */
export class RedisReplayStore implements ReplayStore {
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxSkewMs: number;
  readonly clockCheckIntervalMs: number;
  readonly #client: RedisCommandClient;
  readonly #closer?: () => Promise<void> | void;
  readonly #onClockSkew?: (m: ClockSkewMeasurement) => void;
  readonly #clock: () => number;
  readonly #monotonic: () => number;
  readonly #redact: (message: string) => string;
  readonly #pending = new Map<string, { attempt: string; until: number }>();
  #measured: Measured | undefined = undefined;
  #measuring: Promise<Measured> | undefined = undefined;
  #timer: ReturnType<typeof setInterval> | undefined = undefined;
  #closed = false;
  readonly #onReady = () => {
    // A new connection (perhaps to another server after a failover): measure again before the next consume.
    this.#measured = undefined;
    this.#measureShared().catch(() => {});
  };

  constructor(options: RedisReplayStoreOptions) {
    const { client, prefix = DEFAULT_PREFIX, timeoutMs = 1000, maxSkewMs = 2000, clockCheckIntervalMs = 10_000, close } = options;
    if (client === null || typeof client !== 'object' || typeof client.sendCommand !== 'function') {
      throw new TypeError('client must be a node-redis client (with sendCommand)');
    }
    if (typeof prefix !== 'string') throw new TypeError('prefix must be a string');
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new RangeError('timeoutMs must be a positive integer');
    if (!Number.isInteger(maxSkewMs) || maxSkewMs < 0) throw new RangeError('maxSkewMs must be an integer of 0 or more');
    if (!Number.isInteger(clockCheckIntervalMs) || clockCheckIntervalMs < 1) throw new RangeError('clockCheckIntervalMs must be a positive integer');
    for (const [name, f] of [['onClockSkew', options.onClockSkew], ['clock', options.clock], ['monotonic', options.monotonic], ['redact', options.redact]] as const) {
      if (f !== undefined && typeof f !== 'function') throw new TypeError(`${name} must be a function`);
    }
    this.#client = client;
    this.prefix = prefix;
    this.timeoutMs = timeoutMs;
    this.maxSkewMs = maxSkewMs;
    this.clockCheckIntervalMs = clockCheckIntervalMs;
    this.#closer = close;
    this.#onClockSkew = options.onClockSkew;
    this.#clock = options.clock ?? (() => Date.now());
    this.#monotonic = options.monotonic ?? (() => performance.now());
    this.#redact = options.redact ?? ((m) => m);
    client.on?.('ready', this.#onReady);
    // The first measurement now; a consume waits for it.
    this.#measureShared().catch(() => {});
    const timer = setInterval(() => {
      this.#measureShared().catch(() => {});
    }, clockCheckIntervalMs);
    (timer as { unref?: () => void } | undefined)?.unref?.();
    this.#timer = timer;
  }

  /** The Redis key of a record: `<prefix>spent:v1:<key id>:<token id hex>` (FORMAT.md §5.1). */
  key(id: SpentId): string {
    return this.prefix + id.name;
  }

  /** The last measured skew of the clock here against Redis's, in milliseconds (positive: ahead); undefined before one. */
  get clockSkewMs(): number | undefined {
    return this.#measured?.skewMs;
  }

  /** The last measurement of the clocks, undefined before one. */
  get clockSkew(): ClockSkewMeasurement | undefined {
    const m = this.#measured;
    return m === undefined ? undefined : { skewMs: m.skewMs, uncertaintyMs: m.uncertaintyMs, maxSkewMs: m.maxSkewMs, withinLimit: m.withinLimit };
  }

  /** Consumes whose outcome was unknown, remembered for a retry through this store. */
  get pendingRetries(): number {
    return this.#pending.size;
  }

  /** One call with this store's deadline. */
  async #call(args: string[]): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineError(`Redis did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      return await Promise.race([Promise.resolve().then(() => this.#client.sendCommand(args)), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  #describe(e: unknown): string {
    return this.#redact(e instanceof Error ? e.message : String(e));
  }

  /**
   * Measures the clock here against Redis's `TIME` now (concurrent calls share
   * one measurement) and reports it to `onClockSkew`. The store does this by
   * itself: on connecting, every `clockCheckIntervalMs`, and before a consume
   * when the last measurement is over 30 s old or the wall clock stepped.
   */
  async measureClockSkew(): Promise<ClockSkewMeasurement> {
    const { skewMs, uncertaintyMs, maxSkewMs, withinLimit } = await this.#measureShared();
    return { skewMs, uncertaintyMs, maxSkewMs, withinLimit };
  }

  #measureShared(): Promise<Measured> {
    if (this.#measuring === undefined) {
      this.#measuring = this.#measure().finally(() => {
        this.#measuring = undefined;
      });
    }
    return this.#measuring;
  }

  async #measure(): Promise<Measured> {
    const t0 = this.#clock();
    let reply: unknown;
    try {
      reply = await this.#call(['TIME']);
    } catch (e) {
      throw new ReplayStoreError('unavailable', `could not read Redis TIME to compare the clocks: ${this.#describe(e)}`);
    }
    const t1 = this.#clock();
    const parts = Array.isArray(reply) ? reply.map((x) => Number(replyText(x) ?? x)) : [];
    if (parts.length !== 2 || !parts.every((x) => Number.isSafeInteger(x) && x >= 0)) {
      throw new ReplayStoreError('unavailable', 'Redis answered TIME with something other than [seconds, microseconds]');
    }
    const redisMs = parts[0] * 1000 + parts[1] / 1000;
    const skewMs = (t0 + t1) / 2 - redisMs;
    const uncertaintyMs = (t1 - t0) / 2;
    const m: Measured = {
      skewMs,
      uncertaintyMs,
      maxSkewMs: this.maxSkewMs,
      withinLimit: Math.abs(skewMs) + uncertaintyMs <= this.maxSkewMs,
      at: this.#monotonic(),
      offset: this.#clock() - this.#monotonic(),
    };
    this.#measured = m;
    try {
      this.#onClockSkew?.({ skewMs, uncertaintyMs, maxSkewMs: m.maxSkewMs, withinLimit: m.withinLimit });
    } catch {
      // An operator's hook never fails a consume.
    }
    return m;
  }

  /** Refuses unless a recent measurement puts the clocks within maxSkewMs. */
  async #checkClocks(): Promise<void> {
    let m = this.#measured;
    if (m === undefined && this.#measuring !== undefined) {
      m = await this.#measuring.catch(() => undefined);
    }
    const mono = this.#monotonic();
    if (m === undefined || mono - m.at > RECHECK_AFTER_MS || Math.abs(this.#clock() - mono - m.offset) > CLOCK_STEP_MS) {
      m = await this.#measureShared();
    }
    if (!m.withinLimit) {
      const abs = Math.round(Math.abs(m.skewMs));
      throw new ReplayStoreError(
        'unavailable',
        `the clock here is ${abs} ms ${m.skewMs > 0 ? 'ahead of' : 'behind'} the replay store's (Redis TIME), more than the ${this.maxSkewMs} ms allowed (maxSkewMs): ` +
          `consumes are refused until the clocks agree (measured to ±${Math.ceil(m.uncertaintyMs)} ms)`,
      );
    }
  }

  #takePending(name: string): string | undefined {
    const p = this.#pending.get(name);
    if (p === undefined) return undefined;
    this.#pending.delete(name);
    return p.until > this.#monotonic() ? p.attempt : undefined;
  }

  /** Remembers an attempt whose outcome is unknown until the record's lifetime ends; false when full. */
  #putPending(name: string, attempt: string, lifetimeMs: bigint): boolean {
    const now = this.#monotonic();
    if (!this.#pending.has(name) && this.#pending.size >= PENDING_CAPACITY) {
      for (const [n, p] of this.#pending) if (p.until <= now) this.#pending.delete(n);
      if (this.#pending.size >= PENDING_CAPACITY) return false;
    }
    this.#pending.set(name, { attempt, until: now + Number(lifetimeMs) });
    return true;
  }

  /**
   * Records the token as spent with `SET <name> <attempt> NX GET PX
   * <lifetime_ms>` ({@link recordLifetimeMs}): true if this call (or the
   * retry of this store's own earlier attempt) recorded it, false if it was
   * already spent.
   */
  async insertIfAbsent(record: SpentRecord, ...rest: unknown[]): Promise<boolean> {
    checkSpentRecord(record, rest[0]);
    if (this.#closed) throw new ReplayStoreError('unavailable', 'the replay store is closed');
    await this.#checkClocks();
    const name = this.key(record.id);
    // Counted from the earlier of the record's `now` (the verifier's clock,
    // which a caller may inject) and this store's clock, which the check
    // above holds within maxSkewMs of Redis's: a `now` ahead of it would give
    // a record that dies in Redis while the token still verifies on every
    // clock of the fleet (FORMAT.md §5.1).
    const here = BigInt(Math.floor(this.#clock() / 1000));
    const lifetime = recordLifetimeMs({ expiresAt: record.expiresAt, now: record.now < here ? record.now : here }, this.maxSkewMs);
    // Taken out, so that of two concurrent retries only one sends it.
    const pending = this.#takePending(name);
    const attempt = pending ?? randomAttempt();
    let answer: unknown;
    try {
      answer = await this.#call(['SET', name, attempt, 'NX', 'GET', 'PX', lifetime.toString()]);
    } catch (e) {
      const kind = e instanceof DeadlineError ? 'unknown' : failureKind(e);
      if (kind !== 'unknown') {
        // This SET did not run; an earlier attempt still may have.
        if (pending !== undefined) this.#putPending(name, pending, lifetime);
        const detail = this.#describe(e);
        if (kind === 'reply' && /^OOM\b/.test(detail)) throw new ReplayStoreError('full', `Redis is out of memory and refused the record: ${detail}`);
        throw new ReplayStoreError('unavailable', kind === 'reply' ? `Redis refused the record: ${detail}` : `Redis: ${detail}`);
      }
      const detail = e instanceof DeadlineError ? e.message : `Redis: ${this.#describe(e)}`;
      if (this.#putPending(name, attempt, lifetime)) {
        throw new ReplayStoreError('unavailable', `${detail}; the token may have been recorded: retrying this consume through this same store object is accepted once if it was`, { maybeRecorded: true });
      }
      throw new ReplayStoreError(
        'unavailable',
        `${detail}; the token may have been recorded, and if it was a retry is refused as replayed (this store already remembers ${PENDING_CAPACITY} consumes whose outcome is unknown)`,
        { maybeRecorded: true },
      );
    }
    if (answer === null || answer === undefined) return true;
    const text = replyText(answer);
    if (text === attempt) return true;
    if (text !== undefined) return false;
    if (pending !== undefined) this.#putPending(name, pending, lifetime);
    throw new ReplayStoreError('unavailable', 'Redis answered SET NX GET with neither nil nor a string');
  }

  /** Stops measuring the clocks and closes the client if this store made it ({@link createRedisReplayStore}). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#client.off?.('ready', this.#onReady);
    this.#pending.clear();
    await this.#closer?.();
  }
}

// ---------------------------------------------------------------- URLs

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;

function redactOne(url: string): string {
  // The query's pass/password first: its value may hold an `@`.
  let out = url.replace(/([?&;](?:pass|password)=)[^&;#,]*/gi, '$1***');
  const m = SCHEME.exec(out);
  if (m === null) return out;
  const rest = out.slice(m[0].length);
  // The user-info ends at the last `@`: a password may hold `/`, `?`, `#` or `@`.
  const at = rest.lastIndexOf('@');
  if (at < 0) return out;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  // `redis://secret@host` puts the password alone before the `@`.
  const shown = colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`;
  out = `${m[0]}${shown}${rest.slice(at)}`;
  return out;
}

/**
 * A Redis URL, or a comma-separated list of them (a cluster's seeds), with
 * every password replaced by `***`: the user-info's (`redis://user:***@host`,
 * `redis://***@host`) and any `pass` or `password` query parameter. For
 * messages and logs.
 */
export function redactRedisUrl(text: string): string {
  return String(text)
    .split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)
    .map(redactOne)
    .join(',');
}

/** Every password a URL (or list) holds, as written and percent-decoded. */
function passwordsOf(text: string): string[] {
  const found = new Set<string>();
  for (const url of text.split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)) {
    for (const q of url.matchAll(/[?&;](?:pass|password)=([^&;#,]*)/gi)) found.add(q[1]);
    const m = SCHEME.exec(url);
    if (m === null) continue;
    const rest = url.slice(m[0].length);
    const at = rest.lastIndexOf('@');
    if (at < 0) continue;
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    found.add(colon < 0 ? userinfo : userinfo.slice(colon + 1));
  }
  const all = new Set<string>();
  for (const p of found) {
    if (p.length === 0) continue;
    all.add(p);
    try {
      all.add(decodeURIComponent(p));
    } catch {
      // not percent-encoded
    }
  }
  return [...all].sort((a, b) => b.length - a.length);
}

/** A function that hides `url`'s passwords in any text (the URL itself shown redacted). */
export function redactorFor(url: string | undefined): (message: string) => string {
  if (url === undefined) return (m) => m;
  const secrets = passwordsOf(url);
  const shown = redactRedisUrl(url);
  return (message) => {
    let out = String(message).split(url).join(shown);
    for (const s of secrets) out = out.split(s).join('***');
    return out;
  };
}

// ---------------------------------------------------------------- connecting

export interface CreateRedisReplayStoreOptions {
  /** `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS) or `unix://[user:password@]/path/redis.sock[?db=N]`. */
  url?: string;
  /** Default `reqstate:`. */
  prefix?: string;
  timeoutMs?: number;
  maxSkewMs?: number;
  onClockSkew?: (measurement: ClockSkewMeasurement) => void;
  clock?: () => number;
  monotonic?: () => number;
  clockCheckIntervalMs?: number;
  /** More node-redis `createClient` options (merged over the defaults below). */
  clientOptions?: Record<string, unknown>;
}

// A variable, so that the library's type check does not need `redis` installed.
const REDIS_MODULE = 'redis';

/**
 * A `unix://` URL as node-redis client options. (node-redis 6 parses such a
 * URL, but then hands it to WHATWG URL, which refuses one with a user-info.)
 */
function unixUrlOptions(url: string): Record<string, unknown> | undefined {
  const m = /^unix:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?(\/[^?#]+)(?:\?db=([0-9]+))?$/i.exec(url);
  if (m === null) return undefined;
  const [, username, password, path, db] = m;
  return {
    socket: { path: decodeURIComponent(path) },
    ...(username ? { username: decodeURIComponent(username) } : {}),
    ...(password ? { password: decodeURIComponent(password) } : {}),
    ...(db === undefined ? {} : { database: Number(db) }),
  };
}

/**
 * Connects a node-redis client, wraps it, and measures the clocks once. The
 * client reconnects by itself (a store that is down refuses consumes as
 * `replay_store_unavailable`, and they succeed again once it is back) and does
 * not queue commands while disconnected (they fail at once instead of
 * waiting). Close it with `store.close()`. Errors show the URL with its
 * passwords replaced by `***`.
 */
export async function createRedisReplayStore(options: CreateRedisReplayStoreOptions = {}): Promise<RedisReplayStore> {
  const { url, prefix, timeoutMs = 1000, clientOptions = {} } = options;
  const redact = redactorFor(url);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const redis: any = await import(REDIS_MODULE);
  const socketDefaults = { connectTimeout: timeoutMs, reconnectStrategy: (retries: number) => Math.min(50 * (retries + 1), 1000) };
  const given = clientOptions as { socket?: Record<string, unknown> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let client: any;
  try {
    const unix = url !== undefined && /^unix:/i.test(url) ? unixUrlOptions(url) : undefined;
    if (url !== undefined && /^unix:/i.test(url) && unix === undefined) throw new TypeError('a unix:// URL names a socket: unix://[user:password@]/path/redis.sock[?db=N]');
    const fromUrl = (unix?.socket ?? {}) as Record<string, unknown>;
    client = redis.createClient({
      ...(url === undefined || unix !== undefined ? {} : { url }),
      ...(unix === undefined ? {} : { ...unix, socket: undefined }),
      disableOfflineQueue: true,
      ...clientOptions,
      socket: { ...socketDefaults, ...fromUrl, ...(given.socket ?? {}) },
    });
    // Connection errors are reported per call (replay_store_unavailable); the
    // client keeps reconnecting. Without a listener node-redis would throw them.
    client.on('error', () => {});
    await client.connect();
  } catch (e) {
    try {
      client?.destroy();
    } catch {
      // already closed
    }
    // No `cause`: a URL parser's error carries the URL, password included.
    const where = url === undefined ? 'Redis' : `Redis ${redactRedisUrl(url)}`;
    throw new ReplayStoreError('unavailable', `${where}: ${redact(e instanceof Error ? e.message : String(e))}`);
  }
  const store = new RedisReplayStore({
    client,
    prefix,
    timeoutMs,
    maxSkewMs: options.maxSkewMs,
    onClockSkew: options.onClockSkew,
    clock: options.clock,
    monotonic: options.monotonic,
    clockCheckIntervalMs: options.clockCheckIntervalMs,
    redact,
    close: () => client.destroy(),
  });
  await store.measureClockSkew().catch(() => undefined);
  return store;
}
