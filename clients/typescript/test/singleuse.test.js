// Single-use tokens (FORMAT.md §5.1, §8 step 15) in this package: the
// in-memory store (capacity, sweep, concurrency), store failures, the
// cross-implementation round trip with the Rust CLI, and the Redis store
// (@reqstate/codec/redis) against a real redis-server started here on a Unix
// socket in a temp dir. A missing redis-server or reqstate binary fails.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Codec, Keyring, MAX_CLOCK_LEEWAY, MemoryReplayStore, ReplayStoreError, ReqstateError, recordName, spentRecord, toHex } from '../dist/index.js';
import { RedisReplayStore, createRedisReplayStore, recordLifetimeMs } from '../dist/redis.js';
import { RUST, TS, keyringFile, requireBinary, run, secret } from './support/rust.js';
import { RedisServer } from './support/redis.js';

const NOW = 1_764_460_800;
const TOOL = 'redeem-voucher';
const CONTEXT = 'user-42';
const keyringText = (algorithm) => `version = 1\n\n[[key]]\nid = 9\nalgorithm = "${algorithm}"\nstatus = "primary"\nsecret = "${secret(9)}"\n`;
const codecFor = (algorithm, now = NOW) => new Codec({ keyring: Keyring.fromToml(keyringText(algorithm)), clock: () => now });
const opts = { tool: TOOL, context: CONTEXT, expectedStep: 'commit' };
const mintOne = (codec, state = { voucher: 'V-1' }) => codec.mintSingleUse({ tool: TOOL, step: 'commit', state, ttl: 600, context: CONTEXT }).token;

async function reasonOf(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ReqstateError, String(e));
    return e.reason;
  }
  return 'accepted';
}

const id = (n, keyId = 1) => {
  const tokenId = new Uint8Array(16).fill(n);
  return { keyId, tokenId, name: recordName(keyId, tokenId) };
};
/** What a consume hands a store: record `id(n, keyId)`, kept until `until`, at the verifier's `now`. */
const rec = (n, until, now, keyId = 1) => ({ id: id(n, keyId), expiresAt: until - 600n, now, validUntil: until - 540n, keepUntil: until });

describe('MemoryReplayStore', () => {
  test('a record refuses its second insert until it expires', () => {
    const s = new MemoryReplayStore({ capacity: 8 });
    assert.equal(s.insertIfAbsent(rec(1, 100n, 10n)), true);
    assert.equal(s.insertIfAbsent(rec(1, 100n, 99n)), false);
    assert.equal(s.insertIfAbsent(rec(1, 100n, 10n, 2)), true, 'another key id is another record');
    assert.equal(s.insertIfAbsent(rec(1, 200n, 100n)), true, 'past its time the record is gone');
  });

  test('at capacity it refuses, never evicts a live record, and sweeps expired ones', () => {
    const s = new MemoryReplayStore({ capacity: 2 });
    assert.equal(s.insertIfAbsent(rec(1, 100n, 10n)), true);
    assert.equal(s.insertIfAbsent(rec(2, 300n, 10n)), true);
    assert.throws(() => s.insertIfAbsent(rec(3, 300n, 10n)), (e) => e instanceof ReplayStoreError && e.kind === 'full');
    assert.equal(s.refusedFull, 1);
    assert.equal(s.insertIfAbsent(rec(1, 100n, 50n)), false, 'the live record is still there');
    assert.equal(s.insertIfAbsent(rec(2, 300n, 50n)), false);
    // At 100 record 1 has expired: the full store sweeps it and takes the new one.
    assert.equal(s.insertIfAbsent(rec(3, 300n, 100n)), true);
    assert.equal(s.size, 2);
    assert.equal(s.insertIfAbsent(rec(2, 300n, 100n)), false, 'record 2 was kept');
    s.sweep(300n);
    assert.equal(s.size, 0);
  });

  test('sweep drops expired records only', () => {
    const s = new MemoryReplayStore({ capacity: 100 });
    for (let n = 0; n < 10; n++) s.insertIfAbsent(rec(n, n % 2 ? 500n : 50n, 1n));
    s.sweep(100n);
    assert.equal(s.size, 5);
  });

  test('a codec over a full store refuses with replay_store_full and records nothing', async () => {
    const codec = codecFor('hmac-sha256');
    const store = new MemoryReplayStore({ capacity: 1 });
    const first = mintOne(codec);
    const second = mintOne(codec);
    assert.equal((await codec.consume(first, opts, store)).step, 'commit');
    assert.equal(await reasonOf(codec.consume(second, opts, store)), 'replay_store_full');
    assert.equal(store.size, 1);
    assert.equal(await reasonOf(codec.consume(first, opts, store)), 'replayed');
  });

  test('the 0.1.0 call shape insertIfAbsent(id, until, now) is refused with a message saying so', async () => {
    const s = new MemoryReplayStore({ capacity: 8 });
    assert.throws(() => s.insertIfAbsent(id(1), 100n, 10n), (e) => e instanceof TypeError && /one SpentRecord/.test(e.message));
    const r = new RedisReplayStore({ client: { sendCommand: async () => ['1', '0'] } });
    await assert.rejects(async () => r.insertIfAbsent(id(1), 100n, 10n), (e) => e instanceof TypeError && /one SpentRecord/.test(e.message));
    await r.close();
    assert.equal(s.size, 0);
  });

  test('shared by verifiers with other leeways, a record outlives the token on each of them', async () => {
    const store = new MemoryReplayStore({ capacity: 8 });
    const at = (now, clockLeeway) => new Codec({ keyring: Keyring.fromToml(keyringText('hmac-sha256')), policy: { clockLeeway }, clock: () => now });
    const token = mintOne(at(NOW, 1));
    assert.equal(await reasonOf(at(NOW, 1).consume(token, opts, store)), 'accepted');
    // Past expires_at + 1 s (the first verifier's window), inside the others'.
    for (const [late, leeway] of [[602, 5], [660, 600], [1199, 600]]) {
      assert.equal(await reasonOf(at(NOW + late, leeway).consume(token, opts, store)), 'replayed', `at +${late} s, leeway ${leeway} s`);
    }
    assert.equal(await reasonOf(at(NOW + 1200, 600).consume(token, opts, store)), 'expired');
  });

  test('many concurrent consumes of one token: exactly one succeeds', async () => {
    const codec = codecFor('xchacha20-poly1305');
    for (let round = 0; round < 20; round++) {
      const memory = new MemoryReplayStore({ capacity: 1024 });
      // An asynchronous store in front of it: the consumes interleave.
      const store = { insertIfAbsent: async (record) => (await new Promise((r) => setImmediate(r)), memory.insertIfAbsent(record)) };
      const token = mintOne(codec, { round });
      const reasons = await Promise.all(Array.from({ length: 64 }, () => reasonOf(codec.consume(token, opts, store))));
      assert.equal(reasons.filter((r) => r === 'accepted').length, 1, `round ${round}`);
      assert.equal(reasons.filter((r) => r === 'replayed').length, 63, `round ${round}`);
    }
  });
});

describe('single-use rules in the codec', () => {
  for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
    test(`${algorithm}: distinct tokens, 24 characters longer, never merely verified`, () => {
      const codec = codecFor(algorithm);
      const plain = codec.mint({ tool: TOOL, step: 'commit', state: { voucher: 'V-1' }, ttl: 600, context: CONTEXT }).token;
      const a = mintOne(codec);
      const b = mintOne(codec);
      assert.notEqual(a, b);
      assert.equal(a.length, plain.length + 24);
      assert.throws(() => codec.verify(a, opts), (e) => e.reason === 'single_use');
      assert.throws(() => codec.consumeSync(plain, opts, new MemoryReplayStore()), (e) => e.reason === 'wrong_kind');
    });
  }

  test('the store sees only tokens that passed every other check', async () => {
    const codec = codecFor('hmac-sha256');
    let calls = 0;
    const store = { insertIfAbsent: () => (calls++, true) };
    const token = mintOne(codec);
    assert.equal(await reasonOf(codec.consume(token, { ...opts, tool: 'other' }, store)), 'authentication_failed');
    assert.equal(await reasonOf(codec.consume(token, { ...opts, expectedStep: 'other' }, store)), 'wrong_step');
    assert.equal(await reasonOf(codecFor('hmac-sha256', NOW + 10_000).consume(token, opts, store)), 'expired');
    assert.equal(calls, 0);
    assert.equal(await reasonOf(codec.consume(token, opts, store)), 'accepted');
    assert.equal(calls, 1);
  });

  test('a failing store refuses the token (fail closed)', async () => {
    const codec = codecFor('hmac-sha256');
    const token = mintOne(codec);
    const cases = [
      [{ insertIfAbsent: () => { throw new Error('connection refused'); } }, 'replay_store_unavailable'],
      [{ insertIfAbsent: async () => { throw new ReplayStoreError('unavailable'); } }, 'replay_store_unavailable'],
      [{ insertIfAbsent: async () => { throw new ReplayStoreError('full'); } }, 'replay_store_full'],
      [{ insertIfAbsent: () => 'OK' }, 'replay_store_unavailable'],
      [{ insertIfAbsent: async () => false }, 'replayed'],
    ];
    for (const [store, reason] of cases) assert.equal(await reasonOf(codec.consume(token, opts, store)), reason);
    assert.throws(() => codec.consumeSync(token, opts, { insertIfAbsent: async () => true }), TypeError);
  });

  test('the redemption names its record and keeps it for the whole window', () => {
    const codec = codecFor('xchacha20-poly1305');
    const token = mintOne(codec);
    const r = codec.verifySingleUse(token, opts);
    assert.match(r.spentId.name, /^spent:v1:9:[0-9a-f]{32}$/);
    assert.equal(r.recordUntil, BigInt(NOW + 600 + 60));
    // What a store is handed: the token's expiry, the verifier's clock, its window and how long a shared store keeps it.
    assert.deepEqual(r.record, { id: r.spentId, expiresAt: BigInt(NOW + 600), now: BigInt(NOW), validUntil: BigInt(NOW + 600 + 60), keepUntil: BigInt(NOW + 600 + MAX_CLOCK_LEEWAY) });
    assert.equal(MAX_CLOCK_LEEWAY, 600);
    assert.throws(() => r.finish(false), (e) => e.reason === 'replayed');
    assert.equal(r.finish(true).step, 'commit');
  });

  test('minting a single-use token needs randomness under either algorithm', () => {
    for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
      const codec = new Codec({ keyring: Keyring.fromToml(keyringText(algorithm)), random: () => { throw new Error('no entropy'); } });
      assert.throws(() => mintOne(codec), (e) => e.reason === 'randomness_unavailable', algorithm);
    }
  });
});

for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
  describe(`cross-implementation single use (the Rust CLI and this package), ${algorithm}`, () => {
    let kr;
    before(() => {
      requireBinary();
      kr = keyringFile(keyringText(algorithm));
    });
    after(() => kr?.cleanup());
    const base = (extra) => ['--keyring', kr.file, '--tool', TOOL, '--context', CONTEXT, '--now', String(NOW), ...extra];

    test(`${algorithm}: reqstate mint --single-use, consumed here once, the replay refused`, async () => {
      const m = await run(RUST, ['mint', ...base(['--step', 'commit', '--state-json', '{"voucher":"V-9"}', '--single-use'])]);
      assert.equal(m.code, 0, m.stderr);
      const codec = new Codec({ keyring: Keyring.fromToml(readFileSync(kr.file, 'utf8')), clock: () => NOW });
      const store = new MemoryReplayStore();
      const got = await codec.consume(m.json.token, opts, store);
      assert.deepEqual(got.state, { voucher: 'V-9' });
      assert.equal(await reasonOf(codec.consume(m.json.token, opts, store)), 'replayed');
      assert.throws(() => codec.verify(m.json.token, opts), (e) => e.reason === 'single_use');
    });

    test(`${algorithm}: minted here (library and reqstate-ts), reqstate verify --consume accepts, verify refuses`, async () => {
      const codec = new Codec({ keyring: Keyring.fromToml(readFileSync(kr.file, 'utf8')), clock: () => NOW });
      const fromCli = await run(TS, ['mint', ...base(['--step', 'commit', '--state-json', '{"voucher":"V-1"}', '--single-use'])]);
      assert.equal(fromCli.code, 0, fromCli.stderr);
      for (const token of [mintOne(codec), fromCli.json.token]) {
        const consumed = await run(RUST, ['verify', ...base(['--expected-step', 'commit', '--consume', '--token', token])]);
        assert.equal(consumed.code, 0, consumed.stdout + consumed.stderr);
        assert.deepEqual(consumed.json.state, { voucher: 'V-1' });
        const verified = await run(RUST, ['verify', ...base(['--token', token])]);
        assert.equal(verified.code, 1);
        assert.equal(verified.json.reason, 'single_use');
      }
      const plain = codec.mint({ tool: TOOL, step: 'commit', state: null, ttl: 600, context: CONTEXT }).token;
      const refused = await run(RUST, ['verify', ...base(['--consume', '--token', plain])]);
      assert.equal(refused.json.reason, 'wrong_kind');
      // The keyring is this algorithm's: the token says so in its header.
      assert.equal(Buffer.from(plain, 'base64url')[0] & 3, algorithm === 'hmac-sha256' ? 1 : 2);
    });
  });
}

// ---- Redis

describe('RedisReplayStore against a real redis-server (Unix socket)', () => {
  let dir, server, stores = [];
  const open = async (prefix = 'test:') => {
    const store = await createRedisReplayStore({ prefix, timeoutMs: 500, clientOptions: { socket: { path: server.socket } } });
    stores.push(store);
    return store;
  };
  before(async () => {
    execFileSync('redis-server', ['--version']); // missing: the test fails here
    dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-ts-redis-'));
    server = await RedisServer.start(dir);
  });
  after(async () => {
    for (const s of stores) await s.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('one consume succeeds, the replay is refused, across two clients; the record is named and timed by the shared rule', async () => {
    const a = await open();
    const b = await open();
    const codec = codecFor('xchacha20-poly1305', Math.floor(Date.now() / 1000));
    const token = codec.mintSingleUse({ tool: TOOL, step: 'commit', state: 1, ttl: 600, context: CONTEXT }).token;
    const r = codec.verifySingleUse(token, opts);
    assert.deepEqual((await codec.consume(token, opts, a)).state, 1);
    assert.equal(await reasonOf(codec.consume(token, opts, b)), 'replayed');
    assert.equal(await reasonOf(codec.consume(token, opts, a)), 'replayed');
    const key = `test:${r.spentId.name}`;
    assert.equal(server.cli('EXISTS', key), '1');
    // Kept (expires_at + 600 - now) * 1000 + 2 * maxSkewMs from the SET, on Redis's clock (not until an absolute PXAT of the verifier's).
    const lifetime = Number(recordLifetimeMs(r.record, 2000));
    assert.equal(lifetime, (600 + 600) * 1000 + 4000);
    const pttl = Number(server.cli('PTTL', key));
    assert.ok(pttl <= lifetime && pttl > lifetime - 2000, `PTTL ${pttl}, want about ${lifetime}`);
    // Another prefix is another deployment: its own records.
    const other = await open('other:');
    assert.deepEqual((await codec.consume(token, opts, other)).state, 1);
  });

  test('64 concurrent consumes of one token over two clients: exactly one succeeds', async () => {
    const [a, b] = [await open('race:'), await open('race:')];
    const codec = codecFor('hmac-sha256', Math.floor(Date.now() / 1000));
    for (let round = 0; round < 5; round++) {
      const token = codec.mintSingleUse({ tool: TOOL, step: 'commit', state: round, ttl: 600, context: CONTEXT }).token;
      const reasons = await Promise.all(Array.from({ length: 64 }, (_, i) => reasonOf(codec.consume(token, opts, i % 2 ? a : b))));
      assert.equal(reasons.filter((x) => x === 'accepted').length, 1, reasons.join(','));
      assert.equal(reasons.filter((x) => x === 'replayed').length, 63);
    }
  });

  test('a record for a token expiring at 2^64 - 1 is kept (the lifetime clamped, not an error)', async () => {
    const s = await open('clamp:');
    const far = { keyId: 1, tokenId: new Uint8Array(16), name: recordName(1, new Uint8Array(16)) };
    const now = BigInt(Math.floor(Date.now() / 1000));
    assert.equal(await s.insertIfAbsent(spentRecord(far, (1n << 64n) - 1n, now, 60)), true);
    assert.equal(await s.insertIfAbsent(spentRecord(far, (1n << 64n) - 1n, now, 60)), false);
    assert.ok(Number(server.cli('PTTL', `clamp:${far.name}`)) > 10 ** 14);
  });

  test('a stopped Redis gives replay_store_unavailable, and the store recovers when it is back', async () => {
    const s = await open('down:');
    const codec = codecFor('hmac-sha256', Math.floor(Date.now() / 1000));
    const before = codec.mintSingleUse({ tool: TOOL, step: 'commit', state: 0, ttl: 600, context: CONTEXT }).token;
    assert.equal(await reasonOf(codec.consume(before, opts, s)), 'accepted');
    await server.stop();
    const token = codec.mintSingleUse({ tool: TOOL, step: 'commit', state: 2, ttl: 600, context: CONTEXT }).token;
    const started = Date.now();
    assert.equal(await reasonOf(codec.consume(token, opts, s)), 'replay_store_unavailable');
    assert.ok(Date.now() - started < 2000, 'fails within the deadline');
    assert.equal(await reasonOf(codec.consume(token, opts, s)), 'replay_store_unavailable');
    // Back (a Redis without persistence: it forgot `before`, see FORMAT.md §10).
    server = await RedisServer.start(dir);
    let reason;
    for (let i = 0; i < 100; i++) {
      reason = await reasonOf(codec.consume(token, opts, s));
      if (reason !== 'replay_store_unavailable') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(reason, 'accepted', 'the store reconnected by itself');
    assert.equal(await reasonOf(codec.consume(token, opts, s)), 'replayed');
  });

  test('a client that never answers is refused at the deadline', async () => {
    const s = new RedisReplayStore({ client: { sendCommand: () => new Promise(() => {}) }, timeoutMs: 50 });
    const codec = codecFor('hmac-sha256');
    assert.equal(await reasonOf(codec.consume(mintOne(codec), opts, s)), 'replay_store_unavailable');
  });
});

test('the Redis store lives in its own entry point: the main one does not load redis', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.exports['./redis'].default, './dist/redis.js');
  const main = readFileSync(new URL('../dist/index.js', import.meta.url), 'utf8');
  assert.doesNotMatch(main, /redis/);
  assert.equal(toHex(new Uint8Array([0x0a])), '0a');
});
