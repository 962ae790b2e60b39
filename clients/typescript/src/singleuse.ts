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
 * A record of spent single-use tokens.
 *
 * `insertIfAbsent` records `id` as spent until `until` (unix seconds) if it is
 * not recorded yet and answers `true`; `false` if it was already recorded (and
 * still live at `now`, the verifier's clock). It must be atomic across
 * everything that shares the store: of any number of concurrent inserts of one
 * id, exactly one answers `true`. It must keep a record until `until` and
 * never drop a live record to make room: when it cannot take another, it throws
 * a {@link ReplayStoreError} of kind `full`. Any other failure (unreachable,
 * timed out) is thrown, and refuses the token as `replay_store_unavailable`.
 */
export interface ReplayStore {
  insertIfAbsent(id: SpentId, until: bigint, now: bigint): Promise<boolean> | boolean;
}

/** A store that answers synchronously (usable with `consumeSync`). */
export interface SyncReplayStore extends ReplayStore {
  insertIfAbsent(id: SpentId, until: bigint, now: bigint): boolean;
}

/** Why a store did not record a spent token. */
export class ReplayStoreError extends Error {
  readonly kind: 'full' | 'unavailable';
  constructor(kind: 'full' | 'unavailable', message?: string, options?: { cause?: unknown }) {
    super(message ?? (kind === 'full' ? 'the replay store is full of live records' : 'the replay store is unavailable'), options);
    this.name = 'ReplayStoreError';
    this.kind = kind;
  }
}

/** The refusal for a store's failure: `replay_store_full` or `replay_store_unavailable`. */
export function storeRefusal(e: unknown): ReqstateError {
  if (e instanceof ReplayStoreError && e.kind === 'full') {
    return new ReqstateError('replay_store_full', 'the token was not recorded and is refused', { cause: e });
  }
  const detail = e instanceof Error ? e.message : 'the store failed';
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
 * runs one insert at a time, so an insert is atomic.
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

  insertIfAbsent(id: SpentId, until: bigint, now: bigint): boolean {
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
