// @reqstate/codec/redis: a spent-token store in Redis (or Valkey) for a fleet
// of verifiers (FORMAT.md §5.1, §8 step 15), through the `redis` npm package
// (node-redis, an optional peer dependency: `npm install redis`). One round
// trip per consume: `SET <prefix>spent:v1:<key id>:<token id hex> 1 NX PXAT
// <ms>`, atomic across every client of that Redis. Kept out of the main entry
// point so that the library itself needs no Redis and runs anywhere.
import { ReplayStoreError, type ReplayStore, type SpentId } from './singleuse.js';

/** What the store needs of a client: node-redis's `sendCommand` (v4 to v6). */
export interface RedisCommandClient {
  sendCommand(args: string[]): Promise<unknown>;
}

export interface RedisReplayStoreOptions {
  /** A connected node-redis client (or anything with its `sendCommand`). */
  client: RedisCommandClient;
  /** Prepended to every record name: one per deployment, e.g. `"billing:"`. Default none. */
  prefix?: string;
  /** Deadline of one call in milliseconds (default 1000); past it the token is refused (`replay_store_unavailable`). */
  timeoutMs?: number;
  /** Closes the client (set by {@link createRedisReplayStore}). */
  close?: () => Promise<void> | void;
}

/**
 * Redis's PXAT is a signed 64-bit count of milliseconds; a record kept until
 * the end of year 9999 is kept past any token's expiry that a clock can reach
 * in practice (a token whose `expires_at + leeway` is later is recorded until
 * then: it cannot be replayed sooner, since the record outlives any server).
 */
const MAX_PXAT = 253_402_300_799_999n;

export class RedisReplayStore implements ReplayStore {
  readonly prefix: string;
  readonly timeoutMs: number;
  private readonly client: RedisCommandClient;
  private readonly closer?: () => Promise<void> | void;

  constructor(options: RedisReplayStoreOptions) {
    const { client, prefix = '', timeoutMs = 1000, close } = options;
    if (client === null || typeof client !== 'object' || typeof client.sendCommand !== 'function') {
      throw new TypeError('client must be a node-redis client (with sendCommand)');
    }
    if (typeof prefix !== 'string') throw new TypeError('prefix must be a string');
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new RangeError('timeoutMs must be a positive integer');
    this.client = client;
    this.prefix = prefix;
    this.timeoutMs = timeoutMs;
    this.closer = close;
  }

  /** The Redis key of a record: `<prefix>spent:v1:<key id>:<token id hex>` (FORMAT.md §5.1). */
  key(id: SpentId): string {
    return this.prefix + id.name;
  }

  async insertIfAbsent(id: SpentId, until: bigint, _now: bigint): Promise<boolean> {
    const ms = until * 1000n > MAX_PXAT ? MAX_PXAT : until * 1000n;
    let timer: unknown;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ReplayStoreError('unavailable', `Redis did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    let answer: unknown;
    try {
      answer = await Promise.race([this.client.sendCommand(['SET', this.key(id), '1', 'NX', 'PXAT', ms.toString()]), deadline]);
    } catch (e) {
      if (e instanceof ReplayStoreError) throw e;
      throw new ReplayStoreError('unavailable', `Redis: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
    }
    if (answer === 'OK') return true;
    if (answer === null || answer === undefined) return false;
    throw new ReplayStoreError('unavailable', `Redis answered SET NX with ${String(answer)}`);
  }

  /** Closes the client if this store made it ({@link createRedisReplayStore}). */
  async close(): Promise<void> {
    await this.closer?.();
  }
}

export interface CreateRedisReplayStoreOptions {
  /** `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS) or, for a Unix socket, use `clientOptions.socket.path`. */
  url?: string;
  prefix?: string;
  timeoutMs?: number;
  /** More node-redis `createClient` options (merged over the defaults below). */
  clientOptions?: Record<string, unknown>;
}

// A variable, so that the library's type check does not need `redis` installed.
const REDIS_MODULE = 'redis';

/**
 * Connects a node-redis client and wraps it. The client reconnects by itself
 * (a store that is down refuses consumes as `replay_store_unavailable`, and
 * they succeed again once it is back) and does not queue commands while
 * disconnected (they fail at once instead of waiting). Close it with
 * `store.close()`.
 */
export async function createRedisReplayStore(options: CreateRedisReplayStoreOptions = {}): Promise<RedisReplayStore> {
  const { url, prefix, timeoutMs = 1000, clientOptions = {} } = options;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const redis: any = await import(REDIS_MODULE);
  const socketDefaults = { connectTimeout: timeoutMs, reconnectStrategy: (retries: number) => Math.min(50 * (retries + 1), 1000) };
  const given = clientOptions as { socket?: Record<string, unknown> };
  const client = redis.createClient({
    ...(url === undefined ? {} : { url }),
    disableOfflineQueue: true,
    ...clientOptions,
    socket: { ...socketDefaults, ...(given.socket ?? {}) },
  });
  // Connection errors are reported per call (replay_store_unavailable); the
  // client keeps reconnecting. Without a listener node-redis would throw them.
  client.on('error', () => {});
  await client.connect();
  return new RedisReplayStore({ client, prefix, timeoutMs, close: () => client.destroy() });
}
