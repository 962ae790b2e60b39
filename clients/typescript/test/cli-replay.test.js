// `reqstate-ts verify --consume --replay-store URL`: the spent-token record in
// Redis under the shared rule, across runs and with this package's store;
// the flags' usage errors (exit 64); and Redis passwords, which never reach
// a message (redactRedisUrl, the CLI's stderr and JSON, the store's errors).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Codec, Keyring } from '../dist/index.js';
import { createRedisReplayStore, redactRedisUrl } from '../dist/redis.js';
import { RedisServer, freePort } from './support/redis.js';
import { TS, keyringFile, run, secret } from './support/rust.js';

const NOW = 1_764_460_800;
const TOOL = 'redeem-voucher';
const PASSWORD = 'hunter2';
const keyringText = `version = 1\n\n[[key]]\nid = 3\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret = "${secret(3)}"\n`;
const codec = new Codec({ keyring: Keyring.fromToml(keyringText), clock: () => NOW });
const mint = (ttl = 600) => codec.mintSingleUse({ tool: TOOL, step: 'commit', state: { voucher: 'V-1' }, ttl, context: 'user-42' }).token;

test('redactRedisUrl: user-info passwords (with / and @), lists, pass/password query parameters', () => {
  const cases = [
    ['redis://app:hunter2@cache:6379/0', 'redis://app:***@cache:6379/0'],
    ['rediss://hunter2@cache', 'rediss://***@cache'],
    ['redis://app:hun/ter@2@cache:6379/0', 'redis://app:***@cache:6379/0'],
    ['redis://app:a@b/c@d?e#f@cache:6379', 'redis://app:***@cache:6379'],
    ['redis://:hunter2@cache', 'redis://:***@cache'],
    ['redis://cache:6379/0?password=hunter2&db=1', 'redis://cache:6379/0?password=***&db=1'],
    ['redis://cache:6379/0?db=1&pass=hu@nter/2', 'redis://cache:6379/0?db=1&pass=***'],
    ['redis://cache:6379/0?PASSWORD=hunter2', 'redis://cache:6379/0?PASSWORD=***'],
    ['redis://u:p1@h1:1,redis://v:p/2@x@h2:2, rediss://h3:3?password=p3', 'redis://u:***@h1:1,redis://v:***@h2:2, rediss://h3:3?password=***'],
    ['redis://cache:6379', 'redis://cache:6379'],
    ['unix:///run/redis.sock', 'unix:///run/redis.sock'],
    ['not a url', 'not a url'],
  ];
  for (const [url, want] of cases) assert.equal(redactRedisUrl(url), want, url);
});

describe('reqstate-ts verify --consume --replay-store', () => {
  let dir, server, kr;
  let url; // redis://default:<password>@127.0.0.1:<port>
  const verify = (token, extra = []) => run(TS, ['verify', '--keyring', kr.file, '--tool', TOOL, '--context', 'user-42', '--now', String(NOW), '--expected-step', 'commit', ...extra, token]);
  const consume = (token, extra = []) => verify(token, ['--consume', '--replay-store', url, ...extra]);
  const keyOf = (token, prefix = 'reqstate:') => prefix + codec.verifySingleUse(token, { tool: TOOL, context: 'user-42' }).spentId.name;
  const noSecret = (r) => {
    for (const text of [r.stdout, r.stderr]) {
      for (const s of [PASSWORD, 'hun/ter', 'hun%2Fter', 'ter@2', 'ter%402']) assert.ok(!text.includes(s), `${s} shown in ${text}`);
    }
  };
  before(async () => {
    execFileSync('redis-server', ['--version']);
    dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-ts-cli-redis-'));
    server = await RedisServer.start(dir, { tcp: true, requirepass: PASSWORD });
    url = `redis://default:${PASSWORD}@127.0.0.1:${server.port}`;
    kr = keyringFile(keyringText);
  });
  after(async () => {
    kr?.cleanup();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('consumed once across runs: the second run is replayed (exit 1); the record is reqstate:…, timed by the rule', async () => {
    const token = mint();
    const first = await consume(token);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.deepEqual(first.json.state, { voucher: 'V-1' });
    const second = await consume(token);
    assert.equal(second.code, 1);
    assert.deepEqual(Object.keys(second.json), ['valid', 'reason', 'message']);
    assert.equal(second.json.reason, 'replayed');
    assert.equal(server.cli('EXISTS', keyOf(token)), '1');
    // (expires_at + 600 - now) * 1000 + 2 * maxSkewMs, now being --now.
    const pttl = Number(server.cli('PTTL', keyOf(token)));
    assert.ok(pttl <= 1_204_000 && pttl > 1_194_000, String(pttl));
    noSecret(first);
    noSecret(second);
  });

  test('the same record as the library store with the default prefix, both ways', async () => {
    const store = await createRedisReplayStore({ url });
    try {
      const opts = { tool: TOOL, context: 'user-42', expectedStep: 'commit' };
      const byCli = mint();
      assert.equal((await consume(byCli)).code, 0);
      await assert.rejects(codec.consume(byCli, opts, store), (e) => e.reason === 'replayed');
      const byLibrary = mint();
      assert.equal((await codec.consume(byLibrary, opts, store)).step, 'commit');
      assert.equal((await consume(byLibrary)).json.reason, 'replayed');
    } finally {
      await store.close();
    }
  });

  test('--replay-key-prefix, --replay-max-skew-ms and --replay-timeout-ms', async () => {
    const token = mint();
    const r = await consume(token, ['--replay-key-prefix', 'billing:', '--replay-max-skew-ms', '3000', '--replay-timeout-ms=500']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(server.cli('EXISTS', keyOf(token)), '0');
    const pttl = Number(server.cli('PTTL', keyOf(token, 'billing:')));
    assert.ok(pttl <= 1_206_000 && pttl > 1_196_000, String(pttl));
    // Another prefix is another deployment.
    assert.equal((await consume(token)).code, 0);
    // A deadline Redis does not meet (CLIENT PAUSE WRITE holds the SET): refused, and said to be maybe recorded.
    const held = mint();
    server.cli('CLIENT', 'PAUSE', '4000', 'WRITE');
    const paused = Date.now();
    const late = await consume(held, ['--replay-timeout-ms', '200']);
    assert.ok(Date.now() - paused < 4000, 'the run ended while Redis held its SET');
    assert.equal(late.code, 1, late.stdout + late.stderr);
    assert.equal(late.json.reason, 'replay_store_unavailable');
    assert.match(late.json.message, /within 200 ms/);
    assert.match(late.json.message, /may have been recorded/);
    server.cli('CLIENT', 'UNPAUSE');
    // The run closed its connection, so Redis dropped the held SET: not recorded.
    const again = await consume(held);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.equal((await consume(held)).json?.reason, 'replayed');
  });

  test('a store that fails refuses the token (exit 1, replay_store_unavailable) without showing the password', async () => {
    const port = await freePort();
    const down = await verify(mint(), ['--consume', '--replay-store', `redis://default:${PASSWORD}@127.0.0.1:${port}`]);
    assert.equal(down.code, 1, down.stderr);
    assert.equal(down.json.reason, 'replay_store_unavailable');
    assert.match(down.json.message, new RegExp(`redis://default:\\*\\*\\*@127\\.0\\.0\\.1:${port}`));
    noSecret(down);
    // A wrong password holding / and @ (percent-encoded, as a URL needs).
    const wrong = await verify(mint(), ['--consume', '--replay-store', `redis://default:hun%2Fter%402@127.0.0.1:${server.port}`]);
    assert.equal(wrong.code, 1, wrong.stderr);
    assert.equal(wrong.json.reason, 'replay_store_unavailable');
    assert.match(wrong.json.message, /WRONGPASS|invalid username-password/);
    noSecret(wrong);
    // A password as a query parameter (node-redis does not read it): refused by Redis, not shown.
    const query = await verify(mint(), ['--consume', '--replay-store', `redis://127.0.0.1:${server.port}/0?password=${PASSWORD}`]);
    assert.equal(query.code, 1, query.stderr);
    assert.equal(query.json.reason, 'replay_store_unavailable');
    noSecret(query);
    // A token refused earlier never reaches the store (nor needs it).
    const tampered = await verify(mint().slice(0, -2) + 'AA', ['--consume', '--replay-store', `redis://127.0.0.1:${port}`]);
    assert.equal(tampered.json.reason, 'authentication_failed');
  });

  test('a unix:// URL (node-redis takes one) names the socket; the ranges of docs/CLI.md are accepted at both ends', async () => {
    const token = mint();
    const r = await verify(token, ['--consume', '--replay-store', `unix://default:${PASSWORD}@${server.socket}`, '--replay-timeout-ms', '60000', '--replay-max-skew-ms', '60000']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const again = await verify(token, ['--consume', '--replay-store', url, '--replay-timeout-ms', '1000', '--replay-max-skew-ms', '1']);
    assert.equal(again.code, 1);
    assert.ok(['replayed', 'replay_store_unavailable'].includes(again.json.reason), again.stdout);
    assert.equal((await verify(token, ['--consume', '--replay-store', url])).json.reason, 'replayed');
    const down = await verify(mint(), ['--consume', '--replay-store', `unix://default:${PASSWORD}@${dir}/nothing.sock`]);
    assert.equal(down.json.reason, 'replay_store_unavailable');
    noSecret(down);
  });

  test("the library store's errors and inspection never show the password", async () => {
    const { inspect } = await import('node:util');
    for (const bad of [`redis://default:hun%2Fter%402@127.0.0.1:${server.port}`, `redis://default:hun/ter@2@127.0.0.1:${server.port}`, `redis://default:${PASSWORD}@127.0.0.1:${await freePort()}`]) {
      await assert.rejects(createRedisReplayStore({ url: bad, clientOptions: { socket: { reconnectStrategy: false } } }), (e) => {
        const shown = inspect(e, { depth: 10 }) + e.message;
        for (const secret of [PASSWORD, 'hun/ter', 'hun%2Fter', 'ter@2', 'ter%402']) assert.ok(!shown.includes(secret), `${secret} in ${shown}`);
        assert.equal(e.kind, 'unavailable');
        assert.match(e.message, /redis:\/\/default:\*\*\*@127\.0\.0\.1:/);
        return true;
      });
    }
    const store = await createRedisReplayStore({ url });
    try {
      assert.ok(!inspect(store, { depth: 10, showHidden: true }).includes(PASSWORD));
    } finally {
      await store.close();
    }
  });

  test('usage errors (exit 64, nothing on stdout), the URL shown without its password', async () => {
    const token = mint();
    const cases = [
      [['--replay-store', url]], // without --consume
      [['--replay-key-prefix', 'x:']],
      [['--replay-timeout-ms', '100']],
      [['--replay-max-skew-ms', '100']],
      [['--consume', '--replay-key-prefix', 'x:']], // without --replay-store
      [['--consume', '--replay-store', url, '--replay-timeout-ms', '0']],
      [['--consume', '--replay-store', url, '--replay-timeout-ms', '60001']],
      [['--consume', '--replay-store', url, '--replay-max-skew-ms', '0']],
      [['--consume', '--replay-store', url, '--replay-max-skew-ms', '60001']],
      [['--consume', '--replay-store', 'unix://']],
      [['--consume', '--replay-store', url, '--replay-max-skew-ms', '-1']],
      [['--consume', '--replay-store', url, '--replay-max-skew-ms', '1.5']],
      [['--consume', '--replay-store', url, '--replay-store', url]],
      [['--consume', '--replay-store', '']],
      [['--consume', '--replay-store', `http://default:${PASSWORD}@127.0.0.1:1`]],
      [['--consume', '--replay-store', `redis://default:hun/ter@2@127.0.0.1:${server.port}`]],
      [['--consume', '--replay-store', `redis://default:${PASSWORD}@127.0.0.1:1/x`]],
      [['--consume', '--replay-store', `redis://a:${PASSWORD}@h1:1,redis://b:hun/ter@2@h2:2`]],
    ];
    for (const [extra] of cases) {
      const r = await verify(token, extra);
      assert.equal(r.code, 64, `${extra.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '', extra.join(' '));
      assert.match(r.stderr, /^reqstate-ts: /);
      noSecret(r);
    }
    const shown = await verify(token, ['--consume', '--replay-store', `redis://default:hun/ter@2@127.0.0.1:${server.port}`]);
    assert.match(shown.stderr, new RegExp(`redis://default:\\*\\*\\*@127\\.0\\.0\\.1:${server.port}`));
    const help = await run(TS, ['--help']);
    for (const flag of ['--replay-store URL', '--replay-key-prefix', '--replay-timeout-ms', '--replay-max-skew-ms']) assert.ok(help.stdout.includes(flag), flag);
  });
});
