// The package's API on Node: keyrings (TOML and the compact form), policy
// bounds, states, rotation, the reason names, the MCP SDK drop-in, and the
// command line's own behaviour (the shared contract is tests/conformance).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  Codec,
  Keyring,
  Policy,
  REASONS,
  ReqstateError,
  Tagged,
  callContext,
  createRequestStateCodec,
  decodeValue,
  encodeValue,
  mcpCallOf,
  stepFromInputResponses,
  toHex,
} from '../dist/index.js';
import { REPO, TS, keyringFile, run, secret } from './support/rust.js';

const reason = (r) => (e) => {
  assert.ok(e instanceof ReqstateError, String(e));
  assert.equal(e.reason, r, e.message);
  return true;
};

describe('reason names', () => {
  test('are exactly the list of docs/CLI.md (the Rust Error::reason() names)', () => {
    const doc = readFileSync(path.join(REPO, 'docs/CLI.md'), 'utf8');
    const section = doc.split('### Reasons')[1].split('Verification returns')[0];
    const names = [...section.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]).filter((n) => n !== 'reason');
    assert.deepEqual([...REASONS], names.filter((n, i) => names.indexOf(n) === i && n !== 'reqstate'));
    assert.equal(REASONS.length, 22);
  });
});

describe('keyrings', () => {
  test('the compact example of docs/KEYRING.md loads', () => {
    const doc = readFileSync(path.join(REPO, 'docs/KEYRING.md'), 'utf8');
    const example = doc.split('## The compact form')[1].match(/```text\n(.*)\n```/)[1];
    assert.deepEqual(Keyring.parse(example).keys.map((k) => [k.id, k.status, k.algorithm]), [[2, 'primary', 'xchacha20-poly1305'], [1, 'active', 'hmac-sha256']]);
  });

  const toml = (extra = '') => `# keyring\nversion = 1\n\n[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "active"\ncreated = 2026-11-30T12:00:00Z\nsecret = "${secret(1)}"\n\n[[key]]\nid = 2\nstatus = "primary"\nsecret = "${secret(2).replace(/=+$/, '')}"\n${extra}`;

  test('TOML: inline secrets, default algorithm, padding optional, created', () => {
    const k = Keyring.fromToml(toml());
    assert.equal(k.primary.id, 2);
    assert.equal(k.primary.algorithm, 'xchacha20-poly1305');
    assert.equal(k.get(1).algorithm, 'hmac-sha256');
    assert.equal(k.get(1).created, '2026-11-30T12:00:00.000Z');
    assert.doesNotMatch(JSON.stringify(k.keys), /workingKey|nonceKey|secret/);
  });

  test('TOML: secret_env and secret_file need sources; refused clearly without', () => {
    const text = `[[key]]\nid = 5\nstatus = "primary"\nsecret_env = "MY_KEY"\n[[key]]\nid = 6\nstatus = "active"\nsecret_file = "k6.b64"\n`;
    assert.throws(() => Keyring.fromToml(text), (e) => reason('invalid_keyring')(e) && /secret_env is not available here/.test(e.message));
    const k = Keyring.fromToml(text, { env: { MY_KEY: secret(5) }, readFile: (p) => (assert.equal(p, '/etc/rs/k6.b64'), `  ${secret(6)}\n`), baseDir: '/etc/rs' });
    assert.deepEqual(k.keys.map((x) => x.id), [5, 6]);
    assert.throws(() => Keyring.fromToml(text, { env: {} }), (e) => reason('invalid_keyring')(e) && /not set/.test(e.message) && !/MY_KEY/.test(e.message));
  });

  const refused = [
    ['duplicate id', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\n[[key]]\nid = 1\nstatus = "active"\nsecret = "${secret(2)}"\n`],
    ['no primary', `[[key]]\nid = 1\nstatus = "active"\nsecret = "${secret(1)}"\n`],
    ['two primaries', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\n[[key]]\nid = 2\nstatus = "primary"\nsecret = "${secret(2)}"\n`],
    ['no key', `version = 1\n`],
    ['version 2', `version = 2\n[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\n`],
    ['unknown field', `[[key]]\nid = 1\nstatus = "primary"\nsecrett = "${secret(1)}"\n`],
    ['unknown top-level field', `versio = 1\n[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\n`],
    ['unknown algorithm', `[[key]]\nid = 1\nalgorithm = "aes"\nstatus = "primary"\nsecret = "${secret(1)}"\n`],
    ['unknown status', `[[key]]\nid = 1\nstatus = "${secret(9)}"\nsecret = "${secret(1)}"\n`],
    ['id out of range', `[[key]]\nid = 4294967296\nstatus = "primary"\nsecret = "${secret(1)}"\n`],
    ['id a string', `[[key]]\nid = "1"\nstatus = "primary"\nsecret = "${secret(1)}"\n`],
    ['short secret', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${Buffer.alloc(31, 1).toString('base64')}"\n`],
    ['long secret', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${Buffer.alloc(1025, 1).toString('base64')}"\n`],
    ['url-safe base64 secret', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${Buffer.alloc(32, 0xfb).toString('base64url')}"\n`],
    ['two secret sources', `[[key]]\nid = 1\nstatus = "primary"\nsecret = "${secret(1)}"\nsecret_env = "X"\n`],
    ['local created', `[[key]]\nid = 1\nstatus = "primary"\ncreated = 2026-11-30T12:00:00\nsecret = "${secret(1)}"\n`],
    ['not TOML', `[[key]\nid = 1\n`],
  ];
  for (const [name, text] of refused) {
    test(`TOML refused: ${name}, without showing key material`, () => {
      assert.throws(() => Keyring.fromToml(text), (e) => reason('invalid_keyring')(e) && !e.message.includes(secret(1)) && !e.message.includes(secret(9)));
    });
  }

  test('the compact form: ID:STATUS[:ALGORITHM]:SECRET, commas or whitespace', () => {
    const compact = `2:primary:${secret(2)}, 1:active:hmac-sha256:${secret(1)}\n3:retired:xchacha20-poly1305:${secret(3).replace(/=+$/, '')}`;
    const k = Keyring.parse(compact);
    assert.deepEqual(k.keys.map((x) => [x.id, x.status, x.algorithm]), [[2, 'primary', 'xchacha20-poly1305'], [1, 'active', 'hmac-sha256'], [3, 'retired', 'xchacha20-poly1305']]);
    // Same keys as TOML: tokens cross.
    const fromToml = Keyring.parse(toml());
    const t = new Codec({ keyring: fromToml }).mint({ tool: 't', step: 's', state: { a: 1 } }).token;
    assert.deepEqual(new Codec({ keyring: compact }).verify(t, { tool: 't' }).state, { a: 1 });
    assert.equal(Keyring.toCompact([{ id: 2, status: 'primary', secret: secret(2) }]), `2:primary:xchacha20-poly1305:${secret(2)}`);
    for (const bad of ['', '1:primary', `1:primary:aes:${secret(1)}`, `x:primary:${secret(1)}`, `01:primary:${secret(1)}`, `1:main:${secret(1)}`, `1:active:${secret(1)}`, `1:primary:${secret(1)},1:active:${secret(2)}`]) {
      assert.throws(() => Keyring.fromCompact(bad), (e) => reason('invalid_keyring')(e) && !e.message.includes(secret(1)), bad);
    }
  });
});

describe('policy, minting and verification', () => {
  const keyring = Keyring.parse(`1:primary:${secret(1)},2:active:hmac-sha256:${secret(2)}`);

  test('policy bounds are the Rust Policy bounds', () => {
    for (const ok of [{ maxTokenLen: 64 }, { maxTokenLen: 1048576 }, { clockLeeway: 0 }, { clockLeeway: 600 }, { maxLifetime: 1 }, { maxLifetime: 2592000 }]) new Policy(ok);
    for (const bad of [{ maxTokenLen: 63 }, { maxTokenLen: 1048577 }, { clockLeeway: 601 }, { clockLeeway: -1 }, { maxLifetime: 0 }, { maxLifetime: 2592001 }, { maxLifetime: 1.5 }]) {
      assert.throws(() => new Policy(bad), reason('invalid_argument'), JSON.stringify(bad));
    }
    const p = new Policy();
    assert.deepEqual([p.maxTokenLen, p.clockLeeway, p.maxLifetime], [8192, 60, 86400]);
  });

  test('states of every kind round-trip; the state is encrypted under XChaCha', () => {
    const codec = new Codec({ keyring, clock: () => 1000 });
    const state = { n: 1, f: 0.5, big: 2n ** 64n - 1n, neg: -(2n ** 63n), bytes: new Uint8Array([1, 2]), list: [null, true, 'é'], tag: new Tagged(1, 2), map: new Map([[1, 'one']]) };
    const m = codec.mint({ tool: 't', step: 's', state, ttl: 60, context: 'ctx' });
    assert.deepEqual(codec.verify(m.token, { tool: 't', context: 'ctx', expectedStep: 's' }).state, state);
    assert.doesNotMatch(Buffer.from(m.token, 'base64url').toString('latin1'), /list/);
    assert.deepEqual([m.issuedAt, m.expiresAt, m.keyId], [1000, 1060, 1]);
    assert.throws(() => codec.mint({ tool: 't', step: 's', state: () => 1 }), reason('state_encoding'));
    let deep = 0;
    for (let i = 0; i < 16; i++) deep = [deep];
    codec.mint({ tool: 't', step: 's', state: deep });
    assert.throws(() => codec.mint({ tool: 't', step: 's', state: [deep] }), reason('state_encoding'));
  });

  test('a state the decoder cannot represent is state_decoding; decode: false skips step 14', () => {
    const codec = new Codec({ keyring });
    const dup = new Uint8Array([0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02]);
    const { token } = codec.mint({ tool: 't', step: 's', stateCbor: dup });
    assert.throws(() => codec.verify(token, { tool: 't' }), reason('state_decoding'));
    assert.equal(toHex(codec.verify(token, { tool: 't', decode: false }).stateCbor), toHex(dup));
    assert.throws(() => codec.verify(token, { tool: 't', decode: () => { throw new Error('no'); } }), reason('state_decoding'));
  });

  test('every refusal carries its reason, in the order of FORMAT.md §8', () => {
    let now = 10_000;
    const codec = new Codec({ keyring, clock: () => now });
    const { token } = codec.mint({ tool: 't', step: 'amount', state: 1, ttl: 100, context: 'c' });
    assert.throws(() => codec.verify(token, { tool: '' }), reason('invalid_argument'));
    assert.throws(() => codec.verify(token, { tool: 'x'.repeat(257) }), reason('invalid_argument'));
    assert.throws(() => codec.verify(token, { tool: 't', context: new Uint8Array(65537) }), reason('invalid_argument'));
    assert.throws(() => codec.verify('A'.repeat(8193), { tool: 't' }), reason('too_large'));
    assert.throws(() => codec.verify(`${token}=`, { tool: 't' }), reason('malformed'));
    assert.throws(() => codec.verify(token, { tool: 'u', context: 'c' }), reason('authentication_failed'));
    assert.throws(() => codec.verify(token, { tool: 't', context: 'd' }), reason('authentication_failed'));
    assert.throws(() => codec.verify(token, { tool: 't', context: 'c', expectedStep: 'confirm' }), reason('wrong_step'));
    assert.throws(() => codec.unseal(token, 'c'), reason('wrong_kind'));
    now = 10_000 + 100 + 60;
    assert.throws(() => codec.verify(token, { tool: 't', context: 'c' }), reason('expired'));
    now = 10_000 - 61;
    assert.throws(() => codec.verify(token, { tool: 't', context: 'c' }), reason('not_yet_valid'));
    assert.throws(() => codec.mint({ tool: 't', step: 's', ttl: 86401 }), reason('lifetime_too_long'));
    assert.throws(() => codec.mint({ tool: 't', step: 's', ttl: 0 }), reason('invalid_argument'));
    assert.throws(() => new Codec({ keyring, random: () => { throw new Error('no entropy'); } }).mint({ tool: 't', step: 's' }), reason('randomness_unavailable'));
    const sealed = codec.seal(new Uint8Array([1, 2, 3]), 'aad');
    assert.deepEqual([...codec.unseal(sealed.token, 'aad').payload], [1, 2, 3]);
    assert.throws(() => codec.unseal(sealed.token, 'other'), reason('authentication_failed'));
  });

  test('rotation: new key active, then primary, then the old one retired', () => {
    const s = (n) => secret(n);
    const v1 = new Codec({ keyring: `1:primary:${s(1)}` });
    const inFlight = v1.mint({ tool: 't', step: 's', state: 'x' }).token;
    const v2 = new Codec({ keyring: `1:primary:${s(1)},2:active:${s(2)}` });
    assert.equal(v2.verify(inFlight, { tool: 't' }).keyId, 1);
    const v3 = new Codec({ keyring: `1:active:${s(1)},2:primary:${s(2)}` });
    assert.equal(v3.verify(inFlight, { tool: 't' }).state, 'x');
    const fresh = v3.mint({ tool: 't', step: 's' });
    assert.equal(fresh.keyId, 2);
    assert.equal(v2.verify(fresh.token, { tool: 't' }).keyId, 2);
    const v4 = new Codec({ keyring: `1:retired:${s(1)},2:primary:${s(2)}` });
    assert.throws(() => v4.verify(inFlight, { tool: 't' }), reason('retired_key'));
    assert.throws(() => new Codec({ keyring: `2:primary:${s(2)}` }).verify(inFlight, { tool: 't' }), reason('unknown_key'));
  });
});

describe('MCP SDK drop-in (createRequestStateCodec)', () => {
  const keyring = Keyring.parse(`1:primary:${secret(1)}`);
  const ctx = (inputResponses) => ({ mcpReq: { method: 'tools/call', inputResponses }, http: { authInfo: { clientId: 'app-1', extra: { sub: 'user-42' } } } });
  const call = { tool: 'increase-counter', arguments: { current: 10 } };

  test('binds the tool, the step, the principal, the method and the arguments', async () => {
    const codec = createRequestStateCodec({ keyring, call: () => call, audience: 'counter', expectedStep: stepFromInputResponses });
    const state = await codec.mint({ step: 'amount', current: 10 }, ctx());
    assert.deepEqual(await codec.verify(state, ctx({ amount: {} })), { step: 'amount', current: 10 });
    // The step is carried as the claim, not in the state.
    assert.equal(new Codec({ keyring }).verify(state, { tool: 'increase-counter', context: callContext({ principal: '["app-1",null,"user-42"]', audience: 'counter', method: 'tools/call', arguments: { current: 10 } }) }).step, 'amount');
    await assert.rejects(codec.verify(state, ctx({ confirm: {} })), reason('wrong_step'));
    const other = (over) => createRequestStateCodec({ keyring, audience: 'counter', call: () => ({ ...call, ...over.call }), principal: over.principal });
    await assert.rejects(other({ call: { tool: 'decrease-counter' } }).verify(state, ctx()), reason('authentication_failed'));
    await assert.rejects(other({ call: { arguments: { current: 1000 } } }).verify(state, ctx()), reason('authentication_failed'));
    await assert.rejects(other({ principal: () => 'mallory' }).verify(state, ctx()), reason('authentication_failed'));
    await assert.rejects(codec.verify(state, { ...ctx(), mcpReq: { method: 'prompts/get' } }), reason('authentication_failed'));
    await assert.rejects(codec.verify(`${state.slice(0, -2)}AA`, ctx()), ReqstateError);
    // Payloads without a step field round-trip unchanged.
    for (const payload of [{ current: 10 }, [1, 2], 'text', null, { step: 5 }]) {
      assert.deepEqual(await codec.verify(await codec.mint(payload, ctx()), ctx()), payload);
    }
  });

  test('mcpCallOf reads tools/call, prompts/get and resources/read', () => {
    assert.deepEqual(mcpCallOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: { a: 1 } } }), { tool: 'x', arguments: { a: 1 } });
    assert.deepEqual(mcpCallOf({ method: 'prompts/get', params: { name: 'p' } }), { tool: 'p', arguments: {} });
    assert.deepEqual(mcpCallOf({ method: 'resources/read', params: { uri: 'file:///a' } }), { tool: 'file:///a', arguments: {} });
    assert.equal(mcpCallOf({ method: 'tools/list', params: {} }), undefined);
  });
});

describe('reqstate-ts command line (beyond the conformance test)', () => {
  test('exit codes 0, 1 and 64; permissions; stdin; --flag=-VALUE', async () => {
    const kr = keyringFile(`[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret = "${secret(1)}"\n`);
    try {
      assert.equal((await run(TS, ['--help'])).code, 0);
      const m = await run(TS, ['mint', '--keyring', kr.file, '--tool=-t', '--step', 's', '--state-json=-1', '--now', '100']);
      assert.equal(m.code, 0, m.stderr);
      assert.deepEqual(Object.keys(m.json).sort(), ['expires_at', 'issued_at', 'key_id', 'token']);
      const v = await run(TS, ['verify', '--keyring', kr.file, '--tool=-t', '--now', '100', '-'], `\n ${m.json.token}\r\n`);
      assert.equal(v.code, 0, v.stderr);
      assert.equal(v.stdout, `{"valid":true,"step":"s","state":-1,"state_cbor_hex":"20","key_id":1,"issued_at":100,"expires_at":700}\n`);
      const refused = await run(TS, ['verify', '--keyring', kr.file, '--tool', 't', '--now', '100', m.json.token]);
      assert.equal(refused.code, 1);
      assert.equal(refused.json.reason, 'authentication_failed');
      for (const args of [['mint'], ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--bogus'], ['mint', '--keyring', kr.file, '--tool', 't', '--tool', 'u', '--step', 's'], ['verify', '--keyring', kr.file, '--tool', 't', 'a', 'b'], ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--ttl', '+5'], ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--state-json', '{"a":1,"a":2}'], ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--state-json', '['.repeat(100000)], ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--state-cbor-hex', '1801']]) {
        const r = await run(TS, args);
        assert.equal(r.code, 64, `${args.join(' ').slice(0, 80)}: ${r.stdout}`);
        assert.equal(r.stdout, '');
        assert.ok(r.stderr.length > 0);
      }
      const deep = await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--state-json', `${'['.repeat(60000)}${']'.repeat(60000)}`]);
      assert.equal(deep.code, 1);
      assert.equal(deep.json.reason, 'state_encoding');
      chmodSync(kr.file, 0o644);
      assert.equal((await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's'])).code, 64);
      assert.equal((await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--allow-insecure-keyring-permissions'])).code, 0);
      chmodSync(kr.file, 0o666);
      assert.equal((await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's', '--allow-insecure-keyring-permissions'])).code, 64);
      chmodSync(kr.file, 0o600);
      writeFileSync(kr.file, '[[key]]\nid = 1\nstatus = "primary"\nsecret_file = "missing.b64"\n', { mode: 0o600 });
      const missing = await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's']);
      assert.equal(missing.code, 64);
      assert.match(missing.stderr, /cannot read secret_file/);
      // secret_file: relative to the keyring's directory, checked like the keyring file.
      writeFileSync(path.join(kr.dir, 'missing.b64'), `${secret(3)}\n`, { mode: 0o644 });
      chmodSync(path.join(kr.dir, 'missing.b64'), 0o644);
      const readable = await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's']);
      assert.equal(readable.code, 64);
      assert.match(readable.stderr, /group or others read it/);
      chmodSync(path.join(kr.dir, 'missing.b64'), 0o600);
      assert.equal((await run(TS, ['mint', '--keyring', kr.file, '--tool', 't', '--step', 's'])).code, 0);
    } finally {
      kr.cleanup();
    }
  });
});

test('callContext: the value form gives the corpus context; key material is not shown', async () => {
  const parts = { principal: 'user-42', audience: 'counter-server', method: 'tools/call' };
  const want = '9bcb61ae906b769f72df7ae9e5e74721017ab7cf9b4c795b0444539ecde3a8d6'; // call_context.json "counter"
  assert.equal(toHex(callContext({ ...parts, arguments: { current: 10 } })), want);
  assert.equal(toHex(callContext({ ...parts, argumentsJson: ' { "current" : 1e1 } ' })), want);
  assert.throws(() => callContext({ ...parts, arguments: { x: NaN } }), reason('invalid_argument'));
  const { inspect } = await import('node:util');
  const k = Keyring.parse(`1:primary:${secret(1)}`);
  const shown = inspect(k, { depth: 5 }) + JSON.stringify(k.keys);
  for (const material of [k.primary.workingKey, k.primary.nonceKey]) {
    assert.ok(!shown.includes(toHex(material)) && !shown.includes([...material.slice(0, 4)].join(', ')), 'key material shown');
  }
});

test('encodeValue / decodeValue are inverse on JSON values', () => {
  for (const v of [null, true, 0, -1, 2 ** 53, 1e21, 0.1, -0.5, 'é😀', [1, [2, [3]]], { b: 1, a: { c: [] } }, 356845043272891100]) {
    assert.deepEqual(decodeValue(encodeValue(v)), v);
  }
  assert.equal(toHex(encodeValue({ current: 10, amount: 5 })), 'a266616d6f756e74056763757272656e740a');
  assert.equal(toHex(encodeValue([1.5, 1, -0, 'é'])), '84f93e00010062c3a9');
});
