// Keys on a schedule (docs/KEYRING.md): mint_from and retire_at in the TOML
// file and in the compact form, toCompact writing them, the minting key and
// retirement at the codec's clock (an injected clock around each instant),
// and the schedule checked against the policy by everything that builds a
// codec (Codec, the MCP drop-in, reqstate-ts). The shared vectors are run
// by test/vectors.test.js (v1.json `schedules`).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Codec, Keyring, MemoryReplayStore, Policy, ReqstateError, createRequestStateCodec, formatInstant, parseInstant } from '../dist/index.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO, TS, keyringFile, run, secret } from './support/rust.js';

const reason = (r) => (e) => {
  assert.ok(e instanceof ReqstateError, String(e));
  assert.equal(e.reason, r, e.message);
  return true;
};

/** 2026-12-01T12:05:00Z: key 2 takes over. */
const TAKEOVER = 1796126700;
/** 2026-12-01T12:16:00Z: the earliest safe retire_at of key 1 under 600 s + 60 s. */
const SAFE = TAKEOVER + 660;
const POLICY = new Policy({ maxLifetime: 600, clockLeeway: 60 });

const compact = (retireAt = '2026-12-01T12:16:00Z') =>
  `1:primary:hmac-sha256:${secret(1)};retire_at=${retireAt},2:active:hmac-sha256:${secret(2)};mint_from=2026-12-01T12:05:00Z`;
const toml = (retireAt = '2026-12-01T12:16:00Z') =>
  `\n[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nretire_at = ${retireAt}\nsecret = "${secret(1)}"\n\n` +
  `[[key]]\nid = 2\nalgorithm = "hmac-sha256"\nstatus = "active"\nmint_from = 2026-12-01T12:05:00Z\nsecret = "${secret(2)}"\n`;

/** A codec whose clock reads `clock.now`. */
function clocked(keyring, policy = POLICY) {
  const clock = { now: 0 };
  return { clock, codec: new Codec({ keyring, policy, clock: () => clock.now }) };
}

describe('instants', () => {
  test('RFC 3339 UTC in whole seconds, both ways; anything else undefined', () => {
    assert.equal(parseInstant('2026-12-01T12:05:00Z'), TAKEOVER);
    assert.equal(formatInstant(TAKEOVER), '2026-12-01T12:05:00Z');
    assert.equal(parseInstant('1970-01-01T00:00:00Z'), 0);
    assert.equal(parseInstant('2028-02-29T00:00:00Z'), 1835395200);
    assert.equal(formatInstant(parseInstant('9999-12-31T23:59:59Z')), '9999-12-31T23:59:59Z');
    for (const bad of ['2026-12-01T12:05:00.5Z', '2026-12-01T12:05:00.000Z', '2026-12-01T12:05:00+00:00', '2026-12-01t12:05:00z', '2026-12-01 12:05:00Z', '2026-12-01',
      '2026-12-01T12:05:00', '1969-12-31T23:59:59Z', '2026-02-29T00:00:00Z', '2026-13-01T00:00:00Z', '2026-12-32T00:00:00Z', '2026-12-01T24:00:00Z', '2026-12-01T12:60:00Z',
      '2026-12-01T12:05:60Z', ' 2026-12-01T12:05:00Z', '']) {
      assert.equal(parseInstant(bad), undefined, bad);
    }
  });
});

describe('the compact form with a schedule', () => {
  test('`;mint_from=` and `;retire_at=` load as the TOML fields do', () => {
    const a = Keyring.parse(compact());
    const b = Keyring.parse(toml());
    for (const k of [a, b]) {
      assert.deepEqual(k.keys.map((x) => [x.id, x.status, x.mintFrom, x.retireAt]), [[1, 'primary', undefined, SAFE], [2, 'active', TAKEOVER, undefined]]);
      assert.deepEqual(k.mintOrder.map((x) => x.id), [1, 2]);
      assert.deepEqual(k.transitions(), [{ at: TAKEOVER, keyId: 2, kind: 'starts_minting' }, { at: SAFE, keyId: 1, kind: 'retires' }]);
      assert.equal(k.nextTransition(TAKEOVER - 1)?.at, TAKEOVER);
      assert.equal(k.nextTransition(TAKEOVER)?.at, SAFE);
      assert.equal(k.nextTransition(SAFE), undefined);
    }
    // Whitespace separates entries too; the order of the two fields is free.
    const spaced = Keyring.parse(`2:active:hmac-sha256:${secret(2)};mint_from=2026-12-01T12:05:00Z\n 1:primary:hmac-sha256:${secret(1).replace(/=+$/, '')};retire_at=2026-12-01T12:16:00Z`);
    assert.equal(spaced.mintingKey(TAKEOVER).id, 2);
    const both = Keyring.parse(`1:primary:${secret(1)};retire_at=2026-12-01T12:16:00Z,2:active:${secret(2)};retire_at=2026-12-01T13:00:00Z;mint_from=2026-12-01T12:05:00Z,3:active:${secret(3)};mint_from=2026-12-01T12:20:00Z`);
    assert.deepEqual([both.get(2).mintFrom, both.get(2).retireAt], [TAKEOVER, TAKEOVER + 3300]);
  });

  const refused = [
    ['a fraction of a second', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00.5Z`],
    ['an offset other than Z', `2:active:${secret(2)};mint_from=2026-12-01T13:05:00+01:00`],
    ['a date alone', `2:active:${secret(2)};mint_from=2026-12-01`],
    ['a local date-time', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00`],
    ['before 1970', `2:active:${secret(2)};retire_at=1969-12-31T23:59:59Z`],
    ['an impossible date', `2:active:${secret(2)};mint_from=2026-02-29T12:05:00Z`],
    ['an empty value', `2:active:${secret(2)};mint_from=`],
    ['no value', `2:active:${secret(2)};mint_from`],
    ['a trailing semicolon', `2:active:${secret(2)};`],
    ['an unknown field', `2:active:${secret(2)};expires=2026-12-01T12:05:00Z`],
    ['a secret where the field name goes', `2:active:${secret(2)};${secret(9)}`],
    ['a secret where the instant goes', `2:active:${secret(2)};mint_from=${secret(9)}`],
    ['the same field twice', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00Z;mint_from=2026-12-01T12:06:00Z`],
    ['mint_from on the primary', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00Z`, `1:primary:${secret(1)};mint_from=2026-12-01T12:00:00Z`],
    ['mint_from on a retired key', `2:retired:${secret(2)};mint_from=2026-12-01T12:05:00Z`],
    ['retire_at on a retired key', `2:retired:${secret(2)};retire_at=2026-12-01T12:05:00Z`],
    ['two keys minting from the same instant', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00Z,3:active:${secret(3)};mint_from=2026-12-01T12:05:00Z`],
    ['retire_at on the last key to mint', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00Z;retire_at=2026-12-02T00:00:00Z`],
    ['retire_at before the successor takes over', `2:active:${secret(2)};mint_from=2026-12-01T12:05:00Z`, `1:primary:${secret(1)};retire_at=2026-12-01T12:04:59Z`],
  ];
  for (const [name, entry, primary = `1:primary:${secret(1)}`] of refused) {
    test(`refused: ${name}, showing no secret`, () => {
      assert.throws(() => Keyring.fromCompact(`${primary},${entry}`), (e) => reason('invalid_keyring')(e) && ![1, 2, 3, 9].some((n) => e.message.includes(secret(n))));
    });
  }

  test('the scheduled example of docs/KEYRING.md\'s compact form loads, and passes a 600 s + 60 s policy', () => {
    const doc = readFileSync(path.join(REPO, 'docs/KEYRING.md'), 'utf8').split('## The compact form')[1];
    const examples = [...doc.matchAll(/```text\n(.*)\n```/g)].map((m) => m[1]);
    const scheduled = examples.find((e) => e.includes(';mint_from='));
    assert.ok(scheduled, 'no scheduled example');
    const k = Keyring.parse(scheduled);
    assert.deepEqual(k.keys.map((x) => [x.id, x.mintFrom, x.retireAt]), [[1, undefined, SAFE], [2, TAKEOVER, undefined]]);
    new Codec({ keyring: k, policy: POLICY });
  });

  test('toCompact writes the schedule, and what it writes loads back to the same keys', () => {
    const specs = [
      { id: 1, status: 'primary', algorithm: 'hmac-sha256', secret: secret(1), retireAt: SAFE },
      { id: 2, status: 'active', algorithm: 'hmac-sha256', secret: secret(2), mintFrom: TAKEOVER },
      { id: 3, status: 'retired', secret: secret(3) },
    ];
    const text = Keyring.toCompact(specs);
    assert.equal(
      text,
      `1:primary:hmac-sha256:${secret(1)};retire_at=2026-12-01T12:16:00Z,2:active:hmac-sha256:${secret(2)};mint_from=2026-12-01T12:05:00Z,3:retired:xchacha20-poly1305:${secret(3)}`,
    );
    const back = Keyring.parse(text);
    assert.deepEqual(back.keys.map((k) => k.toJSON()), Keyring.fromKeys(specs).keys.map((k) => k.toJSON()));
    assert.deepEqual(back.keys.map((k) => [k.mintFrom, k.retireAt]), [[undefined, SAFE], [TAKEOVER, undefined], [undefined, undefined]]);
    // Tokens cross between the written form and the specs.
    const at = TAKEOVER + 1;
    const minted = new Codec({ keyring: back, policy: POLICY, clock: () => at }).mint({ tool: 't', step: 's' });
    assert.equal(minted.keyId, 2);
    assert.equal(new Codec({ keyring: Keyring.fromKeys(specs), policy: POLICY, clock: () => at }).verify(minted.token, { tool: 't' }).keyId, 2);
    // What cannot load is not written.
    for (const bad of [
      [{ ...specs[0], mintFrom: TAKEOVER }, specs[1]],
      [specs[0], { ...specs[1], mintFrom: TAKEOVER + 0.5 }],
      [specs[0], { ...specs[1], mintFrom: -1 }],
      [specs[0], { ...specs[1], mintFrom: 253402300800 }],
      [specs[0], { ...specs[1], retireAt: SAFE + 1 }],
    ]) {
      assert.throws(() => Keyring.toCompact(bad), reason('invalid_keyring'), JSON.stringify(bad.map((s) => [s.id, s.mintFrom, s.retireAt])));
    }
  });
});

describe('TOML instants', () => {
  const withMintFrom = (value) => `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\n[[key]]\nid = 2\nstatus = "active"\nmint_from = ${value}\nsecret = "${secret(2)}"\n`;

  test('an offset, a space for T and lower-case letters are the same instant', () => {
    for (const v of ['2026-12-01T12:05:00Z', '2026-12-01T13:05:00+01:00', '2026-12-01T07:05:00-05:00', '2026-12-01 12:05:00Z', '2026-12-01t12:05:00z']) {
      assert.equal(Keyring.fromToml(withMintFrom(v)).get(2).mintFrom, TAKEOVER, v);
    }
  });

  test('refused with the line and key: fractions (of zeros, and beyond the parser\'s milliseconds too), no offset, a date, a string, before 1970', () => {
    for (const [v, why] of [
      ['2026-12-01T12:05:00.000000000Z', /line 5: key 2: `mint_from` must be a whole second/],
      ['2026-12-01T12:05:00.5Z', /line 5: key 2: `mint_from` must be a whole second/],
      ['2026-12-01T12:05:00.0001Z', /line 5: key 2: `mint_from` must be a whole second/],
      ['2026-12-01T12:05:00.000000001Z', /line 5: key 2: `mint_from` must be a whole second/],
      ['2026-12-01T12:05:00', /line 5: key 2: mint_from must be a full date-time with an offset/],
      ['2026-12-01', /line 5: key 2: mint_from must be a full date-time with an offset/],
      ['12:05:00', /line 5: key 2: mint_from must be a full date-time with an offset/],
      ['"2026-12-01T12:05:00Z"', /line 5: key 2: `mint_from` must be a TOML date-time such as .* not a string \(the value is not shown\)/],
      ['1969-12-31T23:59:59Z', /line 5: key 2: mint_from is before 1970-01-01T00:00:00Z/],
      ['1970-01-01T00:30:00+01:00', /line 5: key 2: mint_from is before 1970/],
    ]) {
      assert.throws(() => Keyring.fromToml(withMintFrom(v)), (e) => reason('invalid_keyring')(e) && why.test(e.message), v);
    }
  });

  test('an unknown field lists the schedule fields', () => {
    assert.throws(() => Keyring.fromToml(withMintFrom('2026-12-01T12:05:00Z').replace('mint_from', 'mint_at')), (e) => reason('invalid_keyring')(e) && /line 5: key #2: unknown field `mint_at`, expected one of .*`mint_from`, `retire_at`/.test(e.message));
  });
});

describe('the minting key and retirement at the codec\'s clock', () => {
  test('mint_from - 1 s, at, + 1 s; retire_at - 1 s, at, + 1 s (TOML and compact, an injected clock)', () => {
    for (const text of [toml(), compact()]) {
      const { clock, codec } = clocked(Keyring.parse(text));
      const args = { tool: 't', context: 'ctx' };
      const mint = (at) => {
        clock.now = at;
        return codec.mint({ tool: 't', step: 's', state: at, ttl: 600, context: 'ctx' });
      };
      const before = mint(TAKEOVER - 1);
      const atTakeover = mint(TAKEOVER);
      const after = mint(TAKEOVER + 1);
      assert.deepEqual([before.keyId, atTakeover.keyId, after.keyId], [1, 2, 2]);
      assert.deepEqual([TAKEOVER - 1, TAKEOVER, TAKEOVER + 1].map((t) => codec.keyring.statusAt(codec.keyring.get(1), t)), ['primary', 'active', 'active']);
      // Key 2 verifies before it mints; key 1's tokens verify until retire_at.
      clock.now = TAKEOVER - 1;
      assert.equal(codec.verify(mint(TAKEOVER).token, args).keyId, 2);
      clock.now = TAKEOVER - 1;
      assert.equal(codec.verify(atTakeover.token, args).keyId, 2);
      clock.now = TAKEOVER + 1;
      assert.equal(codec.verify(before.token, args).keyId, 1);
      // A token of key 1 still live at retire_at (minted by key 1 alone, as the vectors' tokens are).
      const late = new Codec({ keyring: `1:primary:hmac-sha256:${secret(1)}`, policy: POLICY, clock: () => SAFE - 10 }).mint({ tool: 't', step: 's', ttl: 600, context: 'ctx' });
      clock.now = SAFE - 1;
      assert.equal(codec.verify(late.token, args).keyId, 1);
      assert.equal(codec.keyring.statusAt(codec.keyring.get(1), SAFE - 1), 'active');
      for (const t of [SAFE, SAFE + 1]) {
        clock.now = t;
        assert.throws(() => codec.verify(late.token, args), (e) => reason('retired_key')(e) && e.message.includes('2026-12-01T12:16:00Z'));
        assert.equal(codec.keyring.statusAt(codec.keyring.get(1), t), 'retired');
        assert.equal(codec.keyring.get(1).isRetiredAt(BigInt(t)), true);
      }
      assert.equal(codec.keyring.get(1).isRetiredAt(SAFE - 1), false);
    }
  });

  test('seal uses the minting key; unseal and consume refuse a key retired at now', () => {
    const { clock, codec } = clocked(Keyring.parse(compact()));
    const payload = new Uint8Array([1, 2, 3]);
    clock.now = TAKEOVER - 1;
    const old = codec.seal(payload, 'aad');
    assert.equal(old.keyId, 1);
    assert.equal(codec.mintSingleUse({ tool: 't', step: 's', ttl: 600 }).keyId, 1);
    clock.now = TAKEOVER;
    assert.equal(codec.seal(payload, 'aad').keyId, 2);
    assert.equal(codec.mintSingleUse({ tool: 't', step: 's', ttl: 600 }).keyId, 2);
    // A single-use token of key 1 still live at retire_at (minted by key 1 alone).
    const once = new Codec({ keyring: `1:primary:hmac-sha256:${secret(1)}`, policy: POLICY, clock: () => SAFE - 10 }).mintSingleUse({ tool: 't', step: 's', ttl: 600 });
    clock.now = SAFE - 1;
    assert.deepEqual(codec.unseal(old.token, 'aad'), { payload, keyId: 1 });
    clock.now = SAFE;
    assert.throws(() => codec.unseal(old.token, 'aad'), reason('retired_key'));
    const store = new MemoryReplayStore({ capacity: 4 });
    assert.throws(() => codec.consumeSync(once.token, { tool: 't' }, store), reason('retired_key'));
    clock.now = SAFE - 1;
    assert.equal(codec.consumeSync(once.token, { tool: 't' }, store).keyId, 1);
  });

  test('a bigint clock past 2^53 still finds the last key to mint', () => {
    const codec = new Codec({ keyring: Keyring.parse(compact()), policy: POLICY, clock: () => 2n ** 60n });
    assert.equal(codec.mintExact({ tool: 't', step: 's', ttl: 1 }).keyId, 2);
  });

  test('the mint order is by mint_from, whatever the order of the entries (a binary search over many keys)', () => {
    const ids = [...Array(40).keys()].map((i) => i + 2);
    const entries = ids.map((id) => `${id}:active:hmac-sha256:${secret(id)};mint_from=${formatInstant(TAKEOVER + (id * 7919) % 400 * 60)}`);
    const keyring = Keyring.parse([`1:primary:hmac-sha256:${secret(1)}`, ...entries.reverse()].join(','));
    const order = keyring.mintOrder.map((k) => k.id);
    assert.deepEqual(order.slice(1).map((id) => keyring.get(id).mintFrom), [...keyring.mintOrder.slice(1).map((k) => k.mintFrom)].sort((a, b) => a - b));
    for (let i = 0; i < order.length; i++) {
      const from = i === 0 ? TAKEOVER - 100 : keyring.get(order[i]).mintFrom;
      const until = i + 1 < order.length ? keyring.get(order[i + 1]).mintFrom : from + 1000;
      for (const t of [from, from + 1, until - 1]) assert.equal(keyring.mintingKey(t).id, order[i], `at ${t}`);
    }
  });
});

describe('the schedule against the policy', () => {
  test('Codec: retire_at at the earliest safe instant is accepted, a second earlier refused naming line, key and instants', () => {
    new Codec({ keyring: toml(), policy: POLICY });
    new Codec({ keyring: compact(), policy: { maxLifetime: 600, clockLeeway: 60 } });
    assert.throws(
      () => new Codec({ keyring: toml('2026-12-01T12:15:59Z'), policy: POLICY }),
      (e) =>
        reason('invalid_keyring')(e) &&
        e.message ===
          'invalid keyring: line 2: key 1: retire_at 2026-12-01T12:15:59Z refuses live tokens: key 1 mints until key 2 takes over at 2026-12-01T12:05:00Z, ' +
            'and its last tokens are accepted until 2026-12-01T12:16:00Z (max lifetime 600 s + clock leeway 60 s); retire it at 2026-12-01T12:16:00Z or later',
    );
    assert.throws(() => new Codec({ keyring: compact('2026-12-01T12:15:59Z'), policy: POLICY }), (e) => reason('invalid_keyring')(e) && /^invalid keyring: key 1: retire_at 2026-12-01T12:15:59Z refuses live tokens/.test(e.message));
    // The default policy (a day's lifetime) needs a day and a minute.
    assert.throws(() => new Codec({ keyring: compact() }), reason('invalid_keyring'));
    new Codec({ keyring: compact('2026-12-02T12:06:00Z') });
    // The keyring alone is structurally fine.
    assert.equal(Keyring.parse(compact('2026-12-01T12:15:59Z')).mintingKey(TAKEOVER).id, 2);
  });

  test('the MCP drop-in checks it with the policy it is given', async () => {
    const call = { tool: 't', arguments: {} };
    assert.throws(() => createRequestStateCodec({ keyring: compact(), audience: 'test', call }), reason('invalid_keyring'));
    const mcp = createRequestStateCodec({ keyring: compact(), audience: 'test', policy: { maxLifetime: 600 }, call, clock: () => TAKEOVER });
    const token = await mcp.mint({ step: 'a', n: 1 }, {});
    assert.deepEqual(await mcp.verify(token, {}), { step: 'a', n: 1 });
    // Minted by key 2, the one minting at TAKEOVER: key 2 alone verifies it.
    const two = createRequestStateCodec({ keyring: `2:primary:hmac-sha256:${secret(2)}`, audience: 'test', call, clock: () => TAKEOVER });
    assert.deepEqual(await two.verify(token, {}), { step: 'a', n: 1 });
  });

  test('reqstate-ts: refused with the policy flags it serves (exit 64, the file named), minted with the key of --now', async () => {
    const kr = keyringFile(toml());
    try {
      const refused = await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--now', String(TAKEOVER)]);
      assert.equal(refused.code, 64, refused.stderr);
      assert.match(refused.stderr, new RegExp(`^reqstate-ts: keyring ${kr.file}: invalid keyring: line 2: key 1: retire_at 2026-12-01T12:16:00Z refuses live tokens.*\\(max lifetime 86400 s \\+ clock leeway 60 s\\)`));
      for (const [now, key] of [[TAKEOVER - 1, 1], [TAKEOVER, 2]]) {
        const m = await run(TS, ['mint', '--keyring', kr.file, '--max-lifetime', '600', '--tool', 't', '--step', 's', '--ttl', '600', '--now', String(now)]);
        assert.equal(m.code, 0, m.stderr);
        assert.equal(m.json.key_id, key);
        const v = await run(TS, ['verify', '--keyring', kr.file, '--max-lifetime', '600', '--tool', 't', '--now', String(now + 1), m.json.token]);
        assert.deepEqual([v.code, v.json.valid, v.json.key_id], [0, true, key], v.stdout);
      }
      // Key 1's token at its retire_at, verified with a key-1-only keyring's token.
      const one = keyringFile(`[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret = "${secret(1)}"\n`);
      try {
        const m = await run(TS, ['mint', '--keyring', one.file, '--tool', 't', '--step', 's', '--ttl', '600', '--now', String(SAFE - 10)]);
        const at = (now) => run(TS, ['verify', '--keyring', kr.file, '--max-lifetime', '600', '--tool', 't', '--now', String(now), m.json.token]);
        assert.deepEqual((await at(SAFE - 1)).json.key_id, 1);
        assert.equal((await at(SAFE)).json.reason, 'retired_key');
      } finally {
        one.cleanup();
      }
    } finally {
      kr.cleanup();
    }
  });
});
