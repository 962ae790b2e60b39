// The two implementations of the primitives (src/primitives.ts): node:crypto
// and pure JavaScript (@noble/*). Node takes the native path; Node without
// process.getBuiltinModule (as before 20.16) takes the pure one, and passes
// the vector suite there too; both give the same bytes, primitive by
// primitive and token by token for the same deterministic inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import * as lib from '../dist/index.js';
import { hchacha20, native, primitives, purePrimitives, macOf } from '../dist/primitives.js';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const hex = (b) => Buffer.from(b).toString('hex');
const NO_NATIVE = ['--import', './test/runtimes/no-native.mjs'];

test('Node takes node:crypto for HMAC and XChaCha20-Poly1305', () => {
  assert.deepEqual(lib.cryptoBackend(), { hmac: 'node:crypto', aead: 'node:crypto' });
  assert.ok(native !== undefined);
  assert.equal(primitives, native);
});

test('Node without getBuiltinModule takes the pure path and passes the vector suite', () => {
  const out = execFileSync(process.execPath, [...NO_NATIVE, 'test/runtimes/driver.js'], { cwd: PKG, encoding: 'utf8', timeout: 120_000 });
  const report = JSON.parse(out.trim().split('\n').pop());
  assert.equal(report.runtime, 'node');
  assert.deepEqual(report.backend, { hmac: 'pure', aead: 'pure' });
  assert.deepEqual(report.failures, []);
  assert.ok(report.passed > 300, `only ${report.passed} checks ran`);
  assert.equal(report.passed, report.expected);
});

test('HChaCha20: draft-irtf-cfrg-xchacha-03 §2.2.1', () => {
  const key = Uint8Array.from({ length: 32 }, (_, i) => i);
  const nonce = Buffer.from('000000090000004a0000000031415927', 'hex');
  assert.equal(hex(hchacha20(key, nonce)), '82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc');
});

test('XChaCha20-Poly1305: draft-irtf-cfrg-xchacha-03 §A.3.1, on both paths', () => {
  const pt = Buffer.from(
    '4c616469657320616e642047656e746c656d656e206f662074686520636c617373206f66202739393a204966204920636f756c64206f6666657220796f75206f6e6c79206f6e652074697020666f7220746865206675747572652c2073756e73637265656e20776f756c642062652069742e',
    'hex',
  );
  const aad = Buffer.from('50515253c0c1c2c3c4c5c6c7', 'hex');
  const key = Buffer.from('808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f', 'hex');
  const nonce = Buffer.from('404142434445464748494a4b4c4d4e4f5051525354555657', 'hex');
  const want =
    'bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e' +
    'c0875924c1c7987947deafd8780acf49';
  for (const p of [native, purePrimitives]) {
    const sealed = p.seal(key, nonce, aad, pt);
    assert.equal(hex(sealed), want, `${p.aeadBackend} seal`);
    assert.equal(hex(p.open(key, nonce, aad, sealed)), hex(pt), `${p.aeadBackend} open`);
  }
});

test('node:crypto and pure give the same bytes: SHA-256, HMAC, seal, open, refusals', () => {
  for (let n = 0; n < 300; n += n < 70 ? 1 : 17) {
    const data = randomBytes(n);
    assert.equal(hex(native.sha256(data)), hex(purePrimitives.sha256(data)), `sha256 ${n}`);
    for (const keyLen of [0, 19, 32, 63, 64, 65, 100]) {
      const key = randomBytes(keyLen);
      const a = macOf(native.hmacKey(key), data);
      const b = macOf(purePrimitives.hmacKey(key), data);
      assert.equal(hex(a), hex(b), `hmac key ${keyLen} data ${n}`);
      assert.equal(hex(a), hex(createHmac('sha256', key).update(data).digest()), `hmac against createHmac, key ${keyLen} data ${n}`);
    }
    const key = randomBytes(32);
    const nonce = randomBytes(24);
    const aad = randomBytes(n % 50);
    const x = native.seal(key, nonce, aad, data);
    const y = purePrimitives.seal(key, nonce, aad, data);
    assert.equal(hex(x), hex(y), `seal ${n}`);
    assert.equal(hex(native.open(key, nonce, aad, y)), hex(data));
    assert.equal(hex(purePrimitives.open(key, nonce, aad, x)), hex(data));
    // Every single-bit change of the sealed bytes, the nonce or the aad is refused by both.
    const flip = (b, i) => {
      const c = Uint8Array.from(b);
      c[i >> 3] ^= 1 << (i & 7);
      return c;
    };
    for (const i of [0, 7, x.length * 8 - 1, (x.length * 8) >> 1]) {
      for (const p of [native, purePrimitives]) assert.equal(p.open(key, nonce, aad, flip(x, i)), undefined, `${p.aeadBackend} tampered bit ${i}`);
    }
    for (const p of [native, purePrimitives]) {
      assert.equal(p.open(key, flip(nonce, 5), aad, x), undefined);
      if (aad.length > 0) assert.equal(p.open(key, nonce, flip(aad, 3), x), undefined);
      assert.equal(p.open(key, nonce, aad, x.subarray(0, 15)), undefined);
      assert.equal(p.equal(x, y), true);
      assert.equal(p.equal(x, flip(y, 1)), false);
      assert.equal(p.equal(x, x.subarray(1)), false);
    }
  }
});

// Deterministic tokens: fixed clock and random source, both algorithms, states and contexts of many sizes.
const MINT_SCRIPT = `
import { Codec, cryptoBackend } from './dist/index.js';
const secret = Buffer.alloc(32, 7).toString('base64');
const out = { backend: cryptoBackend(), tokens: [] };
let seed = 1;
const random = (n) => Uint8Array.from({ length: n }, () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24);
for (const alg of ['hmac-sha256', 'xchacha20-poly1305']) {
  const codec = new Codec({ keyring: '300:primary:' + alg + ':' + secret, clock: () => 1764460800, random });
  for (let n = 0; n < 400; n += 13) {
    const context = new Uint8Array(n).map((_, i) => i * 7);
    const state = { s: 'x'.repeat(n), n, list: Array.from({ length: n % 9 }, (_, i) => i) };
    out.tokens.push(codec.mint({ tool: 'tool-' + n, step: 'step', state, context, ttl: 60 + n }).token);
    out.tokens.push(codec.mintSingleUse({ tool: 't', step: 's', state: n, context }).token);
    out.tokens.push(codec.seal(new Uint8Array(n).fill(n), context).token);
  }
}
console.log(JSON.stringify(out));
`;

test('the same tokens, byte for byte, from the native and the pure path', () => {
  const run = (pre) => JSON.parse(execFileSync(process.execPath, [...pre, '--input-type=module', '-e', MINT_SCRIPT], { cwd: PKG, encoding: 'utf8', timeout: 60_000 }));
  const nat = run([]);
  const pure = run(NO_NATIVE);
  assert.deepEqual(nat.backend, { hmac: 'node:crypto', aead: 'node:crypto' });
  assert.deepEqual(pure.backend, { hmac: 'pure', aead: 'pure' });
  assert.ok(nat.tokens.length > 180);
  assert.deepEqual(pure.tokens, nat.tokens);
  // And each path verifies the other's tokens (here: native verifies the pure path's).
  const secret = Buffer.alloc(32, 7).toString('base64');
  for (const alg of ['hmac-sha256', 'xchacha20-poly1305']) {
    const codec = new lib.Codec({ keyring: `300:primary:${alg}:${secret}`, clock: () => 1764460800 });
    const mine = pure.tokens.slice(alg === 'hmac-sha256' ? 0 : pure.tokens.length / 2, alg === 'hmac-sha256' ? pure.tokens.length / 2 : undefined);
    for (let i = 0; i < mine.length; i += 3) {
      const n = (i / 3) * 13;
      const v = codec.verify(mine[i], { tool: `tool-${n}`, context: new Uint8Array(n).map((_, j) => j * 7), expectedStep: 'step' });
      assert.equal(v.state.n, n);
      assert.equal(codec.unseal(mine[i + 2], new Uint8Array(n).map((_, j) => j * 7)).payload.length, n);
    }
  }
});
