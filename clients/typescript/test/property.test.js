// Property test (fast-check): random states, tools, steps and contexts
// through TypeScript mint -> Rust verify (the `reqstate verify` CLI) and Rust
// mint -> TypeScript verify, under both algorithms; under HMAC the two
// implementations must mint the same token byte for byte. The Rust CLI is
// run for every sample, two at a time.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { Codec, Keyring, toHex } from '../dist/index.js';
import { RUST, keyringFile, requireBinary, run, secret } from './support/rust.js';

const RUNS = Number(process.env.REQSTATE_PROPERTY_RUNS ?? 60);
const NOW = 1764460800;
let files;
before(() => {
  requireBinary();
  files = Object.fromEntries(
    ['hmac-sha256', 'xchacha20-poly1305'].map((alg) => [alg, keyringFile(`version = 1\n[[key]]\nid = 3\nalgorithm = "${alg}"\nstatus = "primary"\nsecret = "${secret(3)}"\n`)]),
  );
});
after(() => Object.values(files ?? {}).forEach((f) => f.cleanup()));

const utf8Len = (s) => Buffer.byteLength(s, 'utf8');
// Text an argv can carry (no NUL), 1 to 256 UTF-8 bytes.
const name = fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).filter((s) => !s.includes('\0') && utf8Len(s) <= 256);
const sample = fc.record({
  algorithm: fc.constantFrom('hmac-sha256', 'xchacha20-poly1305'),
  tool: name,
  step: name,
  context: fc.uint8Array({ maxLength: 80 }),
  // JSON values up to 5 levels; JSON.parse(JSON.stringify(x)) is the expected state (-0 prints as 0).
  // Integral doubles in [2^64, 1e21) (or below -2^63) are left out: JSON.stringify prints them as
  // integer literals that no CBOR integer holds, which docs/CLI.md refuses (exit 64).
  state: fc.jsonValue({ maxDepth: 4 }).filter(function ok(v) {
    if (typeof v === 'number') return !(Number.isInteger(v) && Math.abs(v) < 1e21 && (v < -(2 ** 63) || v >= 2 ** 64));
    if (v !== null && typeof v === 'object') return Object.values(v).every(ok);
    return true;
  }),
  ttl: fc.integer({ min: 1, max: 86400 }),
});

test(`TypeScript <-> Rust on ${RUNS} random samples`, async () => {
  let checked = 0;
  await fc.assert(
    fc.asyncProperty(sample, async (s) => {
      const file = files[s.algorithm].file;
      const expected = JSON.parse(JSON.stringify(s.state));
      const codec = new Codec({ keyring: Keyring.fromToml(readFileSync(file, 'utf8')), clock: () => NOW + 1 });
      const minted = new Codec({ keyring: codec.keyring, clock: () => NOW }).mint({ tool: s.tool, step: s.step, state: s.state, ttl: s.ttl, context: s.context });
      // `--flag=VALUE`: a value may start with '-' (the Rust CLI's parser refuses `--flag -VALUE`).
      const ctx = [`--context-hex=${toHex(s.context)}`];
      const [rv, rm] = await Promise.all([
        run(RUST, ['verify', '--keyring', file, `--tool=${s.tool}`, `--expected-step=${s.step}`, '--now', String(NOW + 1), ...ctx, '--', minted.token]),
        run(RUST, ['mint', '--keyring', file, `--tool=${s.tool}`, `--step=${s.step}`, `--state-json=${JSON.stringify(s.state)}`, '--ttl', String(s.ttl), '--now', String(NOW), ...ctx]),
      ]);
      // TypeScript mint -> Rust verify
      assert.equal(rv.code, 0, `rust verify: ${rv.stdout}${rv.stderr}`);
      assert.equal(rv.json.step, s.step);
      assert.deepEqual(rv.json.state, expected);
      assert.equal(rv.json.expires_at, NOW + s.ttl);
      // Rust mint -> TypeScript verify
      assert.equal(rm.code, 0, `rust mint: ${rm.stdout}${rm.stderr}`);
      const v = codec.verify(rm.json.token, { tool: s.tool, context: s.context, expectedStep: s.step });
      assert.deepEqual(v.state, expected);
      assert.equal(v.step, s.step);
      // The state bytes agree (both sort keys by UTF-8 bytes), so HMAC tokens are identical.
      if (s.algorithm === 'hmac-sha256') assert.equal(minted.token, rm.json.token);
      else assert.equal(minted.token.length, rm.json.token.length);
      // And another tool is refused by the other side.
      assert.throws(() => codec.verify(rm.json.token, { tool: `${s.tool}x`, context: s.context }), { reason: 'authentication_failed' });
      checked++;
    }),
    { numRuns: RUNS, endOnFailure: true },
  );
  assert.equal(checked, RUNS);
});
