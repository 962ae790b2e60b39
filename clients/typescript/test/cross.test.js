// Cross-implementation: tokens minted by each of {the Rust crate (the
// `reqstate mint` CLI, local mode), the sidecar (`reqstate serve`, gRPC over
// a Unix socket), this package} verify with each of the others, from the
// same keyring file, under both algorithms; and refuse another tool in each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Codec, Keyring, callContext, toHex } from '../dist/index.js';
import { RUST, Sidecar, keyringFile, requireBinary, run, secret } from './support/rust.js';

const STATE = { current: 10, amount: 5, note: 'é ☃ 😀', list: [1, 2.5, -3, null, true], nested: { b: [], a: {} } };
const TOOL = 'increase-counter';
const STEP = 'confirm';
const CONTEXT = callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', arguments: { current: 10 } });

for (const algorithm of ['xchacha20-poly1305', 'hmac-sha256']) {
  const other = algorithm === 'hmac-sha256' ? 'xchacha20-poly1305' : 'hmac-sha256';
  describe(`cross-implementation, primary key ${algorithm}`, () => {
    let kr, sidecar, codec;
    before(async () => {
      requireBinary();
      kr = keyringFile(
        `version = 1\n\n[[key]]\nid = 7\nalgorithm = "${algorithm}"\nstatus = "primary"\nsecret = "${secret(7)}"\n\n` +
          `[[key]]\nid = 8\nalgorithm = "${other}"\nstatus = "active"\nsecret = "${secret(8)}"\n`,
      );
      sidecar = await Sidecar.start(kr.file);
      codec = new Codec({ keyring: Keyring.fromToml(readFileSync(kr.file, 'utf8')) });
    });
    after(async () => {
      await sidecar?.stop();
      kr?.cleanup();
    });

    const minters = {
      rust: async () => {
        const r = await run(RUST, ['mint', '--keyring', kr.file, '--tool', TOOL, '--step', STEP, '--state-json', JSON.stringify(STATE), '--context-hex', toHex(CONTEXT)]);
        assert.equal(r.code, 0, r.stderr);
        return r.json.token;
      },
      sidecar: async () => (await sidecar.call('mint', { tool: TOOL, step: STEP, stateJson: JSON.stringify(STATE), ttlSeconds: 600, context: Buffer.from(CONTEXT) })).token,
      typescript: async () => codec.mint({ tool: TOOL, step: STEP, state: STATE, context: CONTEXT }).token,
    };
    const verifiers = {
      rust: async (token, tool = TOOL) => {
        const r = await run(RUST, ['verify', '--keyring', kr.file, '--tool', tool, '--expected-step', STEP, '--context-hex', toHex(CONTEXT), token]);
        if (r.code !== 0) return { valid: false, reason: r.json?.reason ?? `exit ${r.code}: ${r.stderr}` };
        return { valid: true, step: r.json.step, state: r.json.state, keyId: r.json.key_id };
      },
      sidecar: async (token, tool = TOOL) => {
        const r = await sidecar.call('verify', { token, tool, expectedStep: STEP, context: Buffer.from(CONTEXT) });
        if (!r.valid) return { valid: false, reason: r.reason.replace(/^REASON_/, '').toLowerCase() };
        return { valid: true, step: r.step, state: r.stateValue === 'stateJson' ? JSON.parse(r.stateJson) : { bytes: toHex(r.state) }, keyId: r.keyId };
      },
      typescript: async (token, tool = TOOL) => {
        try {
          const v = codec.verify(token, { tool, context: CONTEXT, expectedStep: STEP });
          return { valid: true, step: v.step, state: v.state, keyId: v.keyId };
        } catch (e) {
          return { valid: false, reason: e.reason ?? String(e) };
        }
      },
    };

    for (const m of Object.keys(minters)) {
      for (const v of Object.keys(verifiers)) {
        test(`${m} mints, ${v} verifies`, async () => {
          const token = await minters[m]();
          assert.equal(Buffer.from(token.slice(0, 2), 'base64url')[0], algorithm === 'hmac-sha256' ? 0x11 : 0x12);
          const got = await verifiers[v](token);
          assert.deepEqual(got, { valid: true, step: STEP, state: STATE, keyId: 7 });
          assert.deepEqual(await verifiers[v](token, 'other-tool'), { valid: false, reason: 'authentication_failed' });
        });
      }
    }

    test('HMAC is deterministic across Rust and TypeScript; XChaCha is not', async () => {
      const now = 1764460800;
      const r = await run(RUST, ['mint', '--keyring', kr.file, '--tool', TOOL, '--step', STEP, '--state-json', JSON.stringify(STATE), '--context-hex', toHex(CONTEXT), '--now', String(now)]);
      assert.equal(r.code, 0, r.stderr);
      const fixed = new Codec({ keyring: codec.keyring, clock: () => now });
      const t1 = fixed.mint({ tool: TOOL, step: STEP, state: STATE, context: CONTEXT }).token;
      const t2 = fixed.mint({ tool: TOOL, step: STEP, state: STATE, context: CONTEXT }).token;
      if (algorithm === 'hmac-sha256') {
        assert.equal(t1, r.json.token);
        assert.equal(t1, t2);
      } else {
        assert.notEqual(t1, r.json.token);
        assert.notEqual(t1, t2);
        assert.equal(t1.length, r.json.token.length);
      }
    });
  });
}
