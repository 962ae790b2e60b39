// The rule every Redis spent-token store follows (the sidecar in Rust, this
// package, the Python package: one schema, one Redis), checked against a real
// redis-server: the default prefix `reqstate:`, one `SET <name> <attempt> NX
// GET PX <lifetime_ms>` per consume with a lifetime relative to the
// verifier's clock that outlives the token on every verifier whatever its
// leeway, the refusal of consumes while the clock here and Redis's disagree by
// more than maxSkewMs, and the retry of a consume whose outcome was unknown.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Codec, Keyring, ReqstateError } from '../dist/index.js';
import { RedisReplayStore, createRedisReplayStore, recordLifetimeMs } from '../dist/redis.js';
import { RedisServer } from './support/redis.js';
import { secret } from './support/rust.js';

const TOOL = 'redeem-voucher';
const CONTEXT = 'user-42';
const opts = { tool: TOOL, context: CONTEXT, expectedStep: 'commit' };
const keyring = Keyring.fromToml(`version = 1\n\n[[key]]\nid = 7\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret = "${secret(7)}"\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A verifier whose clock reads the real one plus `offsetMs`. */
const verifier = (offsetMs = 0, clockLeeway = 60) => new Codec({ keyring, policy: { clockLeeway }, clock: () => Math.floor((Date.now() + offsetMs) / 1000) });
const mint = (codec, ttl = 600, state = 1) => codec.mintSingleUse({ tool: TOOL, step: 'commit', state, ttl, context: CONTEXT }).token;

async function refusal(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ReqstateError, String(e && e.stack));
    return e;
  }
  return undefined;
}
const reasonOf = async (promise) => (await refusal(promise))?.reason ?? 'accepted';

/** Consumes every ~200 ms until the verifier calls the token expired; the reasons seen before. */
async function untilExpired(codec, token, store) {
  const seen = [];
  for (let i = 0; i < 200; i++) {
    const r = await reasonOf(codec.consume(token, opts, store));
    if (r === 'expired') return seen;
    seen.push(r);
    await sleep(200);
  }
  throw new Error(`never expired: ${seen.join(',')}`);
}

describe('the shared Redis rule, against a real redis-server', () => {
  let dir, server;
  const stores = [];
  const open = async (options = {}) => {
    const store = await createRedisReplayStore({ timeoutMs: 1000, ...options, clientOptions: { socket: { path: server.socket } } });
    stores.push(store);
    return store;
  };
  const recordKey = (codec, token, prefix = 'reqstate:') => prefix + codec.verifySingleUse(token, opts).spentId.name;
  before(async () => {
    execFileSync('redis-server', ['--version']); // missing: the test fails here
    dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-ts-rule-'));
    server = await RedisServer.start(dir);
  });
  after(async () => {
    for (const s of stores) await s.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('(e) the default prefix is reqstate:, the value a fresh 32-hex attempt, the lifetime relative and long enough for every leeway', async () => {
    const store = await open();
    assert.equal(store.prefix, 'reqstate:');
    const codec = verifier(0, 60);
    const token = mint(codec, 600);
    const now = BigInt(Math.floor(Date.now() / 1000));
    assert.equal(await reasonOf(codec.consume(token, opts, store)), 'accepted');
    const key = recordKey(codec, token);
    assert.match(key, /^reqstate:spent:v1:7:[0-9a-f]{32}$/);
    assert.equal(server.cli('EXISTS', key), '1');
    assert.match(server.cli('GET', key), /^[0-9a-f]{32}$/);
    // (expires_at + 600 - now) * 1000 + 2 * maxSkewMs: 1200 s and 4 s here.
    const pttl = Number(server.cli('PTTL', key));
    const want = Number((codec.verifySingleUse(token, opts).record.expiresAt + 600n - now) * 1000n) + 4000;
    assert.ok(pttl <= want && pttl > want - 3000, `PTTL ${pttl}, want about ${want}`);
    assert.equal(await reasonOf(codec.consume(token, opts, store)), 'replayed');
  });

  test('(a) a verifier 1.5 s behind Redis (within maxSkewMs) consumes once and is refused as replayed until the token expires there', async () => {
    const offset = -1500;
    const store = await open({ clock: () => Date.now() + offset });
    const codec = verifier(offset, 1);
    const token = mint(codec, 2);
    assert.equal(await reasonOf(codec.consume(token, opts, store)), 'accepted');
    const seen = await untilExpired(codec, token, store);
    assert.ok(seen.length >= 8, `only ${seen.length} attempts`);
    assert.deepEqual([...new Set(seen)], ['replayed'], seen.join(','));
  });

  test('(b) two verifiers with leeways of 1 s and 5 s on one Redis: consumed on the first, replayed on the second until it expires there', async () => {
    const [one, five] = [verifier(0, 1), verifier(0, 5)];
    const [a, b] = [await open(), await open()];
    const token = mint(one, 1);
    assert.equal(await reasonOf(one.consume(token, opts, a)), 'accepted');
    const seen = await untilExpired(five, token, b);
    assert.ok(seen.length >= 20, `only ${seen.length} attempts`);
    assert.deepEqual([...new Set(seen)], ['replayed'], seen.join(','));
  });

  for (const offset of [4200, -4200]) {
    test(`(c) a verifier whose clock is ${offset} ms off Redis's is refused with the skew message, and nothing is recorded`, async () => {
      const seen = [];
      const store = await open({ prefix: 'skew:', clock: () => Date.now() + offset, onClockSkew: (m) => seen.push(m) });
      const codec = verifier(offset);
      const token = mint(codec);
      const e = await refusal(codec.consume(token, opts, store));
      assert.equal(e?.reason, 'replay_store_unavailable');
      const word = offset > 0 ? 'ahead of' : 'behind';
      const said = new RegExp(`the clock here is (\\d+) ms ${word} the replay store's \\(Redis TIME\\), more than the 2000 ms allowed \\(maxSkewMs\\): consumes are refused until the clocks agree`).exec(e.message);
      assert.equal(Number(said?.[1]), Math.round(Math.abs(store.clockSkewMs)), e.message);
      assert.equal(server.cli('--scan', '--pattern', 'skew:*'), '', 'no record written');
      assert.ok(Math.abs(store.clockSkewMs - offset) <= store.clockSkew.uncertaintyMs + 5, JSON.stringify(store.clockSkew));
      assert.equal(store.clockSkew.withinLimit, false);
      assert.ok(seen.length >= 1 && seen.every((m) => !m.withinLimit && m.maxSkewMs === 2000 && Math.abs(m.skewMs - offset) <= m.uncertaintyMs + 5), JSON.stringify(seen));
    });
  }

  test('(c) a skew within maxSkewMs is allowed; maxSkewMs is an option', async () => {
    const codec = verifier();
    // The measured skew is -900 ms give or take half the round trip of TIME
    // (the store's own uncertainty), which a loaded machine can stretch: the
    // message is checked against the measurement, and the measurement
    // against the offset within its stated uncertainty.
    const strict = await open({ prefix: 'skew2:', maxSkewMs: 500, clock: () => Date.now() - 900 });
    const message = (await refusal(codec.consume(mint(codec), opts, strict)))?.message ?? 'accepted';
    const said = Number(/the clock here is (\d+) ms behind .* more than the 500 ms allowed/.exec(message)?.[1]);
    assert.equal(said, Math.round(Math.abs(strict.clockSkewMs)), message);
    assert.ok(Math.abs(strict.clockSkewMs + 900) <= strict.clockSkew.uncertaintyMs + 5, JSON.stringify(strict.clockSkew));
    const loose = await open({ prefix: 'skew2:', maxSkewMs: 3000, clock: () => Date.now() - 900 });
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, loose)), 'accepted', JSON.stringify(loose.clockSkew));
    assert.ok(Math.abs(loose.clockSkewMs + 900) <= loose.clockSkew.uncertaintyMs + 5, JSON.stringify(loose.clockSkew));
  });

  test('a wall clock that steps is measured again before the next consume (not only every 10 s)', async () => {
    let offset = 0;
    const store = await open({ prefix: 'step:', clock: () => Date.now() + offset });
    const codec = verifier();
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, store)), 'accepted');
    offset = 5000;
    const e = await refusal(codec.consume(mint(codec), opts, store));
    assert.match(e?.message ?? 'accepted', /(49\d\d|5\d\d\d) ms ahead of the replay store's/);
    offset = 0;
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, store)), 'accepted', 'the clocks agree again');
  });

  test('a measurement older than 30 s is taken again before a consume', async () => {
    // Both clocks jump 31 s: no step, but the measurement is stale.
    let jump = 0;
    let measured = 0;
    const store = await open({ prefix: 'stale:', clock: () => Date.now() + jump, monotonic: () => performance.now() + jump, onClockSkew: () => measured++ });
    const codec = verifier();
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, store)), 'accepted');
    const before = measured;
    jump = 29_000;
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, store)), 'accepted', 'a 29 s old measurement is used as it is');
    assert.equal(measured, before);
    jump = 31_000;
    assert.match((await refusal(codec.consume(mint(codec), opts, store)))?.message ?? 'accepted', /3\d\d\d\d ms ahead of/);
    assert.equal(measured, before + 1);
  });

  test('the clocks are measured every clockCheckIntervalMs in the background, until close()', async () => {
    const seen = [];
    const store = await createRedisReplayStore({ clockCheckIntervalMs: 100, onClockSkew: (m) => seen.push(m), clientOptions: { socket: { path: server.socket } } });
    assert.equal(seen.length, 1, 'measured once on connecting, before the store is handed over');
    await sleep(550);
    assert.ok(seen.length >= 4, `${seen.length} measurements`);
    assert.ok(seen.every((m) => m.withinLimit && Math.abs(m.skewMs) < 100));
    await store.close();
    const n = seen.length;
    await sleep(300);
    assert.equal(seen.length, n, 'no measurement after close()');
    assert.equal(await reasonOf(verifier().consume(mint(verifier()), opts, store)), 'replay_store_unavailable');
  });

  test("a caller's node-redis client: measured before the first consume, kept open by close(), measured again on reconnect", async () => {
    const { createClient } = await import('redis');
    const client = createClient({ socket: { path: server.socket } });
    await client.connect();
    try {
      let measured = 0;
      const store = new RedisReplayStore({ client, onClockSkew: () => measured++ });
      const codec = verifier();
      const token = mint(codec);
      assert.equal(await reasonOf(codec.consume(token, opts, store)), 'accepted');
      assert.ok(measured >= 1 && typeof store.clockSkewMs === 'number');
      assert.equal(server.cli('EXISTS', recordKey(codec, token)), '1');
      const before = measured;
      client.emit('ready');
      await sleep(100);
      assert.equal(measured, before + 1, 'a new connection is measured');
      await store.close();
      assert.equal(await client.sendCommand(['PING']), 'PONG', "the caller's client stays open");
      assert.equal(client.listenerCount('ready'), 0, 'the store left no listener behind');
    } finally {
      client.destroy();
    }
  });

  test('(d) a consume held past the deadline (CLIENT PAUSE WRITE) is refused, then its retry through the same store is accepted once', async () => {
    const a = await open({ timeoutMs: 300 });
    const b = await open();
    const codec = verifier();
    const token = mint(codec);
    const key = recordKey(codec, token);
    server.cli('CLIENT', 'PAUSE', '1500', 'WRITE');
    const paused = Date.now();
    const first = await refusal(codec.consume(token, opts, a));
    assert.equal(first?.reason, 'replay_store_unavailable');
    assert.match(first.message, /may have been recorded/);
    assert.match(first.message, /same store/);
    await sleep(Math.max(0, paused + 1500 - Date.now()) + 300);
    assert.equal(server.cli('EXISTS', key), '1', 'the queued SET ran when the pause ended');
    // Two concurrent retries through the same store: the pending attempt goes to one.
    const retries = await Promise.all([reasonOf(codec.consume(token, opts, a)), reasonOf(codec.consume(token, opts, a))]);
    assert.deepEqual(retries.sort(), ['accepted', 'replayed']);
    assert.equal(await reasonOf(codec.consume(token, opts, a)), 'replayed');
    assert.equal(await reasonOf(codec.consume(token, opts, b)), 'replayed', 'another verifier');
  });

  test('(d) a retry whose outcome is unknown again keeps the pending attempt for the next', async () => {
    const a = await open({ timeoutMs: 300 });
    const b = await open();
    const codec = verifier();
    const token = mint(codec);
    for (let round = 0; round < 2; round++) {
      server.cli('CLIENT', 'PAUSE', '900', 'WRITE');
      const paused = Date.now();
      assert.equal(await reasonOf(codec.consume(token, opts, a)), 'replay_store_unavailable', `round ${round}`);
      await sleep(Math.max(0, paused + 900 - Date.now()) + 300);
    }
    assert.equal(await reasonOf(codec.consume(token, opts, b)), 'replayed');
    assert.equal(await reasonOf(codec.consume(token, opts, a)), 'accepted');
    assert.equal(await reasonOf(codec.consume(token, opts, a)), 'replayed');
  });

  test('a Redis out of memory (maxmemory, noeviction) refuses the record: replay_store_full, nothing remembered', async () => {
    const store = await open({ prefix: 'oom:' });
    const codec = verifier();
    server.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    server.cli('CONFIG', 'SET', 'maxmemory', '1');
    try {
      const e = await refusal(codec.consume(mint(codec), opts, store));
      assert.equal(e?.reason, 'replay_store_full', e?.message);
      assert.match(e.message, /OOM/);
      assert.equal(store.pendingRetries, 0, 'Redis answered: the outcome is known');
    } finally {
      server.cli('CONFIG', 'SET', 'maxmemory', '0');
    }
    assert.equal(await reasonOf(codec.consume(mint(codec), opts, store)), 'accepted');
  });
});

describe('RedisReplayStore with a scripted client', () => {
  const redisTime = () => {
    const ms = Date.now();
    return [String(Math.floor(ms / 1000)), String((ms % 1000) * 1000)];
  };
  /** A client whose TIME answers and whose SET does what `set` says. */
  const scripted = (set) => ({ sendCommand: async (args) => (args[0] === 'TIME' ? redisTime() : set(args)) });
  const record = (n) => {
    const tokenId = new Uint8Array(16);
    new DataView(tokenId.buffer).setUint32(0, n);
    const name = `spent:v1:1:${Buffer.from(tokenId).toString('hex')}`;
    const now = BigInt(Math.floor(Date.now() / 1000));
    return { id: { keyId: 1, tokenId, name }, expiresAt: now + 60n, now, validUntil: now + 120n, keepUntil: now + 660n };
  };
  const stores = [];
  after(async () => {
    for (const s of stores) await s.close();
  });
  const storeOf = (set, options = {}) => {
    const s = new RedisReplayStore({ client: scripted(set), timeoutMs: 20, ...options });
    stores.push(s);
    return s;
  };

  test('at most 10 000 consumes of unknown outcome are remembered; past that the message promises no retry', async () => {
    const s = storeOf(() => new Promise(() => {}));
    const errors = await Promise.all(Array.from({ length: 10_001 }, (_, i) => s.insertIfAbsent(record(i)).then(() => undefined, (e) => e)));
    assert.equal(s.pendingRetries, 10_000);
    assert.ok(errors.every((e) => e?.kind === 'unavailable' && e.maybeRecorded === true));
    assert.equal(errors.filter((e) => /accepted once/.test(e.message)).length, 10_000);
    assert.equal(errors.filter((e) => /already remembers 10000/.test(e.message)).length, 1);
  });

  test('a lost connection is an unknown outcome (remembered); an error reply from Redis is not', async () => {
    const sent = [];
    let fail = () => Promise.reject(new Error('Socket closed unexpectedly'));
    const s = storeOf((args) => (sent.push(args), fail()));
    await assert.rejects(s.insertIfAbsent(record(1)), (e) => e.maybeRecorded && /Socket closed unexpectedly; the token may have been recorded/.test(e.message));
    assert.equal(s.pendingRetries, 1);
    class ErrorReply extends Error {}
    fail = () => Promise.reject(new ErrorReply('NOPERM this user has no permissions to run the set command'));
    await assert.rejects(s.insertIfAbsent(record(2)), (e) => e.kind === 'unavailable' && !e.maybeRecorded && /Redis refused the record: NOPERM/.test(e.message));
    assert.equal(s.pendingRetries, 1, 'not remembered');
    // The retry of record 1 sends the remembered attempt; refused by Redis, it is kept for the next.
    await assert.rejects(s.insertIfAbsent(record(1)));
    assert.equal(sent.at(-1)[2], sent[0][2], 'the same attempt');
    assert.equal(s.pendingRetries, 1);
    fail = () => Promise.resolve(sent[0][2]);
    assert.equal(await s.insertIfAbsent(record(1)), true, 'Redis holds our attempt: recorded by the first call');
    assert.equal(s.pendingRetries, 0);
    assert.deepEqual(sent[0].slice(3), ['NX', 'GET', 'PX', String((60 + 600) * 1000 + 4000)]);
    assert.match(sent[0][2], /^[0-9a-f]{32}$/);
    assert.notEqual(sent[0][2], sent[1][2], 'a fresh attempt per consume');
  });

  test('answers: nil recorded now, our attempt back recorded by us, any other string replayed', async () => {
    let answer;
    const s = storeOf((args) => Promise.resolve(answer(args)));
    answer = () => null;
    assert.equal(await s.insertIfAbsent(record(1)), true);
    answer = (args) => args[2];
    assert.equal(await s.insertIfAbsent(record(1)), true);
    answer = () => '1'; // a record an older store wrote
    assert.equal(await s.insertIfAbsent(record(1)), false);
    answer = () => 'f'.repeat(32);
    assert.equal(await s.insertIfAbsent(record(1)), false);
    answer = () => 42;
    await assert.rejects(s.insertIfAbsent(record(1)), (e) => e.kind === 'unavailable');
  });

  test('recordLifetimeMs reproduces every shared_lifetimes vector of tests/vectors/v1.json', () => {
    const text = readFileSync(new URL('../../../tests/vectors/v1.json', import.meta.url), 'utf8');
    // Integers of 16 digits or more as strings, so that none loses precision.
    const vectors = JSON.parse(text.replace(/([:\[,]\s*)(\d{16,})(?=\s*[,}\]])/g, '$1"$2"')).shared_lifetimes;
    assert.ok(vectors.length >= 8, `${vectors.length} vectors`);
    for (const v of vectors) {
      const got = recordLifetimeMs({ expiresAt: BigInt(v.expires_at), now: BigInt(v.now) }, Number(v.max_skew_ms));
      assert.equal(got, BigInt(v.lifetime_ms), v.name);
    }
  });

  test('recordLifetimeMs: (expires_at + 600 - now) * 1000 + 2 * maxSkewMs, at least 1000', () => {
    assert.equal(recordLifetimeMs({ expiresAt: 1000n, now: 900n }, 2000), 704_000n);
    assert.equal(recordLifetimeMs({ expiresAt: 1000n, now: 1599n }, 0), 1000n);
    assert.equal(recordLifetimeMs({ expiresAt: 1000n, now: 1599n }, 250), 1500n);
    assert.equal(recordLifetimeMs({ expiresAt: 1000n, now: 5000n }, 0), 1000n);
  });

  test('options are checked', () => {
    const client = scripted(() => null);
    assert.throws(() => new RedisReplayStore({ client, maxSkewMs: -1 }), RangeError);
    assert.throws(() => new RedisReplayStore({ client, maxSkewMs: 1.5 }), RangeError);
    assert.throws(() => new RedisReplayStore({ client, clockCheckIntervalMs: 0 }), RangeError);
    assert.throws(() => new RedisReplayStore({ client, onClockSkew: 'log' }), TypeError);
  });
});
