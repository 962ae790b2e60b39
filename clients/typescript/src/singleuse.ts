// Single-use tokens (FORMAT.md §5.1, §8 step 15): the spent-token record, the
// store that keeps it, and the redemption through which alone a single-use
// token's contents are reached. No Node-only API: the Redis store is in
// ./redis.ts (entry point `@reqstate/codec/redis`).
import { toHex } from './bytes.js';
import { ReqstateError } from './errors.js';

/** Length of a single-use token's random id, in bytes (FORMAT.md §5.1). */
export const TOKEN_ID_LEN = 16;

/**
 * What a spent single-use token is recorded under: its key id and its random
 * token id, never the token (a bearer credential). `name` is the record's
 * name of FORMAT.md §5.1 without a deployment prefix:
 * `spent:v1:<key id in decimal>:<token id in lowercase hex>`.
 */
export interface SpentId {
  readonly keyId: number;
  readonly tokenId: Uint8Array;
  readonly name: string;
}

/** The record name of FORMAT.md §5.1, after `prefix` (default none). */
export function recordName(keyId: number, tokenId: Uint8Array, prefix = ''): string {
  return `${prefix}spent:v1:${keyId}:${toHex(tokenId)}`;
}

export function spentId(keyId: number, tokenId: Uint8Array): SpentId {
  return Object.freeze({ keyId, tokenId: tokenId.slice(), name: recordName(keyId, tokenId) });
}

/**
 * The largest `clock_leeway` any verifier may have (FORMAT.md §8's policy
 * range, 0 to 600 s). A store shared by verifiers keeps a record until the
 * token's `expires_at` plus this, so that the record outlives the token on
 * every verifier, whatever its leeway.
 */
export const MAX_CLOCK_LEEWAY = 600;

/**
 * What a consume asks a store to record (FORMAT.md §8 step 15): the token's
 * id and the times a store needs to keep the record long enough.
 */
export interface SpentRecord {
  /** Key id, token id and the record's name (without a deployment prefix). */
  readonly id: SpentId;
  /** The token's expiry, unix seconds (`issued_at + lifetime`). */
  readonly expiresAt: bigint;
  /** The verifier's clock reading used for this verification, unix seconds. */
  readonly now: bigint;
  /**
   * The end of this verifier's acceptance window: `expiresAt + clock_leeway`
   * (saturating). Enough only for a store that no verifier with a larger
   * leeway (or another clock) shares.
   */
  readonly validUntil: bigint;
  /**
   * How long a shared store keeps the record, on the verifier's clock:
   * `expiresAt + MAX_CLOCK_LEEWAY` (saturating), past the token's acceptance
   * window on every verifier whatever its leeway. A store on another clock
   * (Redis) keeps it for a time relative to `now` instead (see
   * `@reqstate/codec/redis`).
   */
  readonly keepUntil: bigint;
}

const U64_MAX = (1n << 64n) - 1n;

/** Throws a TypeError unless `record` is a {@link SpentRecord} (a store called the 0.1.0 way gets told). */
export function checkSpentRecord(record: unknown, extra?: unknown): asserts record is SpentRecord {
  const r = record as Partial<SpentRecord> | null | undefined;
  if (extra !== undefined || typeof r?.id?.name !== 'string' || typeof r.expiresAt !== 'bigint' || typeof r.now !== 'bigint' || typeof r.keepUntil !== 'bigint') {
    throw new TypeError('insertIfAbsent takes one SpentRecord { id, expiresAt, now, validUntil, keepUntil } (0.1.0 took (id, until, now))');
  }
}

/** The record of a consume: `validUntil` from the verifier's leeway, `keepUntil` from {@link MAX_CLOCK_LEEWAY}. */
export function spentRecord(id: SpentId, expiresAt: bigint, now: bigint, clockLeeway: number | bigint): SpentRecord {
  const sat = (x: bigint) => (x > U64_MAX ? U64_MAX : x);
  return Object.freeze({
    id,
    expiresAt,
    now,
    validUntil: sat(expiresAt + BigInt(clockLeeway)),
    keepUntil: sat(expiresAt + BigInt(MAX_CLOCK_LEEWAY)),
  });
}

/**
 * A record of spent single-use tokens.
 *
 * `insertIfAbsent(record)` records `record.id` as spent if it is not recorded
 * yet and answers `true`; `false` if it was already recorded (and still live
 * at `record.now`, the verifier's clock). It must be atomic across everything
 * that shares the store: of any number of concurrent inserts of one id,
 * exactly one answers `true`. It must keep a record at least until
 * `record.keepUntil` on the verifier's clock (a store shared only by
 * verifiers with one leeway and one clock may stop at `record.validUntil`),
 * and never drop a live record to make room: when it cannot take another, it
 * throws a {@link ReplayStoreError} of kind `full`. Any other failure
 * (unreachable, timed out) is thrown, and refuses the token as
 * `replay_store_unavailable`.
 *
 * (In 0.1.0 the method was `insertIfAbsent(id, until, now)`.)
 */
export interface ReplayStore {
  insertIfAbsent(record: SpentRecord): Promise<boolean> | boolean;
}

/** A store that answers synchronously (usable with `consumeSync`). */
export interface SyncReplayStore extends ReplayStore {
  insertIfAbsent(record: SpentRecord): boolean;
}

/** Why a store did not record a spent token. */
export class ReplayStoreError extends Error {
  readonly kind: 'full' | 'unavailable';
  /**
   * The store cannot tell whether it recorded the token (a call that timed
   * out or lost its connection may still have run). The token is refused all
   * the same; the message says what a retry gets.
   */
  readonly maybeRecorded: boolean;
  constructor(kind: 'full' | 'unavailable', message?: string, options?: { cause?: unknown; maybeRecorded?: boolean }) {
    super(message ?? (kind === 'full' ? 'the replay store is full of live records' : 'the replay store is unavailable'), options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ReplayStoreError';
    this.kind = kind;
    this.maybeRecorded = options?.maybeRecorded === true;
  }
}

/** The refusal for a store's failure: `replay_store_full` or `replay_store_unavailable`. */
export function storeRefusal(e: unknown): ReqstateError {
  if (e instanceof ReplayStoreError && e.kind === 'full') {
    return new ReqstateError('replay_store_full', `the token was not recorded and is refused (${e.message})`, { cause: e });
  }
  const detail = e instanceof Error ? e.message : 'the store failed';
  if (e instanceof ReplayStoreError && e.maybeRecorded) return new ReqstateError('replay_store_unavailable', `the token is refused: ${detail}`, { cause: e });
  return new ReqstateError('replay_store_unavailable', `the token was not recorded and is refused (${detail})`, { cause: e });
}

/** `true` answers once; anything else that is not `false` is a store failure. */
export function recordedOrThrow(answer: unknown): boolean {
  if (answer === true || answer === false) return answer;
  throw storeRefusal(new ReplayStoreError('unavailable', 'the store answered neither true nor false'));
}

export interface MemoryReplayStoreOptions {
  /** The most live records it holds (default 1 000 000). */
  capacity?: number;
}

/**
 * Spent-token records in this isolate or process: for a server with one
 * replica (a fleet needs a shared store: `@reqstate/codec/redis`). JavaScript
 * runs one insert at a time, so an insert is atomic. A record is kept until
 * `keepUntil` (`expires_at + 600`), so verifiers with different leeways can
 * share the store.
 *
 * Bounded: at capacity it first drops expired records (`until <= now`); if
 * every record is still live it refuses with {@link ReplayStoreError} `full`
 * (counted in `refusedFull`) rather than evict one, which would re-open replay.
 * The sweep runs only when the earliest expiry has passed, so a store full of
 * live records refuses in constant time.
 */
export class MemoryReplayStore implements SyncReplayStore {
  readonly capacity: number;
  private readonly records = new Map<string, bigint>();
  private earliest: bigint | undefined = undefined;
  /** Inserts refused because the store was full of live records. */
  refusedFull = 0;

  constructor(options: MemoryReplayStoreOptions = {}) {
    const { capacity = 1_000_000 } = options;
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
    this.capacity = capacity;
  }

  /** Records held now, expired ones not yet swept included. */
  get size(): number {
    return this.records.size;
  }

  insertIfAbsent(record: SpentRecord, ...rest: unknown[]): boolean {
    checkSpentRecord(record, rest[0]);
    const { id, now, keepUntil: until } = record;
    const held = this.records.get(id.name);
    if (held !== undefined) {
      if (held > now) return false;
      this.records.delete(id.name);
    }
    if (this.records.size >= this.capacity) {
      if (this.earliest !== undefined && this.earliest <= now) this.sweep(now);
      if (this.records.size >= this.capacity) {
        this.refusedFull++;
        throw new ReplayStoreError('full', `the replay store holds its capacity of ${this.capacity} live records`);
      }
    }
    this.records.set(id.name, until);
    if (this.earliest === undefined || until < this.earliest) this.earliest = until;
    return true;
  }

  /** Drops every record whose time has passed (`until <= now`). */
  sweep(now: bigint | number): void {
    const n = BigInt(now);
    let earliest: bigint | undefined = undefined;
    for (const [name, until] of this.records) {
      if (until <= n) this.records.delete(name);
      else if (earliest === undefined || until < earliest) earliest = until;
    }
    this.earliest = earliest;
  }
}
