// The Worker (src/index.ts, bundled by esbuild as wrangler would) in the real
// workerd runtime through miniflare, on a loopback HTTP port, driven by the
// MCP TypeScript SDK v2 client. Keys come from the REQSTATE_KEYS binding;
// rotating them is a new binding value (miniflare setOptions), no code change.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { Miniflare } from 'miniflare';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Codec, Keyring, callContext, createRequestStateCodec } from '@reqstate/codec';

const DIR = fileURLToPath(new URL('..', import.meta.url));
const secret = (seed) => Buffer.alloc(32, seed).toString('base64');
const KEYS = {
  one: `1:primary:${secret(1)}`,
  oneAndNewActive: `1:primary:${secret(1)},2:active:${secret(2)}`,
  newPrimary: `2:primary:${secret(2)},1:active:${secret(1)}`,
  oldRetired: `2:primary:${secret(2)},1:retired:${secret(1)}`,
};

let mf;
let url;
let script;
const options = (keys) => ({ modules: true, script, compatibilityDate: '2026-07-01', bindings: { REQSTATE_KEYS: keys }, host: '127.0.0.1', port: 0 });
async function useKeys(keys) {
  await mf.setOptions(options(keys));
  url = await mf.ready;
}

before(async () => {
  const built = await esbuild.build({
    entryPoints: [`${DIR}/src/index.ts`],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    write: false,
    logLevel: 'silent',
  });
  script = built.outputFiles[0].text;
  mf = new Miniflare(options(KEYS.one));
  url = await mf.ready;
});
after(async () => {
  await mf?.dispose();
});

async function connect({ autoFulfill = true } = {}) {
  const asked = [];
  const mcp = new Client(
    { name: 'worker-test', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill } },
  );
  mcp.setRequestHandler('elicitation/create', async (request) => {
    const message = String(request.params.message);
    asked.push(message);
    if (message.startsWith('By how much')) return { action: 'accept', content: { amount: 5 } };
    if (message.startsWith('Increase the counter')) return { action: 'accept', content: { confirm: true } };
    return { action: 'decline' };
  });
  await mcp.connect(new StreamableHTTPClientTransport(new URL('/mcp', url)));
  return { mcp, asked };
}

const ARGS = { current: 10 };
const AMOUNT = { amount: { action: 'accept', content: { amount: 5 } } };
const CONFIRM = { confirm: { action: 'accept', content: { confirm: true } } };
const opts = { allowInputRequired: true };
const round = (mcp, { args = ARGS, inputResponses, requestState, name = 'increase-counter' } = {}) =>
  mcp.callTool({ name, arguments: args, ...(inputResponses && { inputResponses }), ...(requestState && { requestState }) }, opts);
const keyIdOf = (token) => Buffer.from(token, 'base64url')[1];
const invalidState = (err) => {
  assert.equal(err.code, -32602, String(err));
  assert.match(String(err.message), /Invalid or expired requestState/);
  return true;
};

/** The Worker's binding of a token, built by the test (same keys, same binding), with an injectable clock. */
function testCodec({ keys = KEYS.one, tool = 'increase-counter', args = ARGS, clock } = {}) {
  return createRequestStateCodec({ codec: new Codec({ keyring: Keyring.parse(keys), clock }), call: { tool, arguments: args }, audience: 'counter-worker' });
}
const CTX = { mcpReq: { method: 'tools/call' } };
/** A round as the Worker mints it: asks `confirm`, its state the values so far. */
const confirmRound = (codec) => codec.inputRequired(CTX, { inputRequests: { confirm: {} }, state: { stage: 'confirm', current: 10, amount: 5 } });
/** The step and state a token carries, read with the test's own codec. */
const opened = (token, keys = KEYS.one) => {
  const v = new Codec({ keyring: Keyring.parse(keys) }).verify(token, {
    tool: 'increase-counter',
    context: callContext({ principal: 'null', audience: 'counter-worker', method: 'tools/call', arguments: ARGS }),
  });
  return { step: v.step, state: v.state };
};

describe('the seed 001 Worker in workerd', () => {
  test('the SDK client drives amount -> confirm -> result: 10 + 5 = 15', async () => {
    const { mcp, asked } = await connect();
    try {
      assert.deepEqual((await mcp.listTools()).tools.map((t) => t.name), ['increase-counter']);
      const result = await mcp.callTool({ name: 'increase-counter', arguments: ARGS });
      assert.deepEqual(result.content, [{ type: 'text', text: 'The counter is now 15.' }]);
      assert.equal(asked.length, 2);
      assert.match(asked[1], /from 10 by 5/);
    } finally {
      await mcp.close();
    }
  });

  test('manual rounds: the tokens are reqstate tokens, short, bound to the call and to the input asked', async () => {
    const { mcp } = await connect({ autoFulfill: false });
    try {
      const r1 = await round(mcp);
      assert.equal(r1.resultType, 'input_required');
      assert.equal(Buffer.from(r1.requestState, 'base64url')[0], 0x12); // state token, XChaCha20-Poly1305
      assert.ok(r1.requestState.length < 140, r1.requestState);
      assert.deepEqual(opened(r1.requestState), { step: '["amount"]', state: { stage: 'amount', current: 10 } });
      assert.deepEqual(await testCodec().verify(r1.requestState, CTX), { stage: 'amount', current: 10 });
      const r2 = await round(mcp, { inputResponses: AMOUNT, requestState: r1.requestState });
      assert.ok(r2.inputRequests.confirm);
      assert.deepEqual(opened(r2.requestState), { step: '["confirm"]', state: { stage: 'confirm', current: 10, amount: 5 } });
      const r3 = await round(mcp, { inputResponses: CONFIRM, requestState: r2.requestState });
      assert.deepEqual(r3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
    } finally {
      await mcp.close();
    }
  });

  test('missing or other-round answers are asked again, not refused', async () => {
    const { mcp } = await connect({ autoFulfill: false });
    try {
      const r1 = await round(mcp);
      for (const inputResponses of [undefined, CONFIRM]) {
        const again = await round(mcp, { inputResponses, requestState: r1.requestState });
        assert.equal(again.resultType, 'input_required');
        assert.deepEqual(Object.keys(again.inputRequests), ['amount']);
        assert.deepEqual(opened(again.requestState).state, { stage: 'amount', current: 10 });
      }
      const r2 = await round(mcp, { inputResponses: AMOUNT, requestState: r1.requestState });
      // The amount round's answer sent again to the confirm round: asked again (confirm).
      const again = await round(mcp, { inputResponses: AMOUNT, requestState: r2.requestState });
      assert.deepEqual(Object.keys(again.inputRequests), ['confirm']);
      const r3 = await round(mcp, { inputResponses: CONFIRM, requestState: again.requestState });
      assert.deepEqual(r3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
    } finally {
      await mcp.close();
    }
  });

  test('tampered, expired, other-tool and changed-arguments requestState get -32602', async () => {
    const { mcp } = await connect({ autoFulfill: false });
    try {
      const r1 = await round(mcp);
      const r2 = await round(mcp, { inputResponses: AMOUNT, requestState: r1.requestState });
      const i = 40;
      const tampered = r2.requestState.slice(0, i) + (r2.requestState[i] === 'A' ? 'B' : 'A') + r2.requestState.slice(i + 1);
      const now = Math.floor(Date.now() / 1000);
      // Control: the test's own mint of that round at the real time is accepted, so each refusal below is for its one change.
      const good = (await confirmRound(testCodec({ clock: () => now }))).requestState;
      assert.deepEqual((await round(mcp, { inputResponses: CONFIRM, requestState: good })).content, [{ type: 'text', text: 'The counter is now 15.' }]);
      const cases = {
        tampered: [tampered, {}, 'authentication_failed'],
        expired: [(await confirmRound(testCodec({ clock: () => now - 7200 }))).requestState, {}, 'expired'],
        'other tool': [(await confirmRound(testCodec({ tool: 'decrease-counter', clock: () => now }))).requestState, {}, 'authentication_failed'],
        'changed arguments': [r2.requestState, { args: { current: 1000 } }, 'authentication_failed'],
      };
      for (const [name, [token, over, reason]] of Object.entries(cases)) {
        await assert.rejects(round(mcp, { inputResponses: CONFIRM, requestState: token, ...over }), invalidState, name);
        // ...and the reason, checked with the package directly:
        const v = createRequestStateCodec({ keyring: KEYS.one, call: { tool: 'increase-counter', arguments: over.args ?? ARGS }, audience: 'counter-worker' });
        await assert.rejects(v.verify(token, CTX), (e) => e.reason === reason, name);
      }
      // The genuine token still completes the flow.
      const r3 = await round(mcp, { inputResponses: CONFIRM, requestState: r2.requestState });
      assert.deepEqual(r3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
    } finally {
      await mcp.close();
    }
  });

  test('key rotation between rounds keeps the flow; a retired key is refused', async () => {
    await useKeys(KEYS.one);
    let { mcp } = await connect({ autoFulfill: false });
    try {
      const r1 = await round(mcp);
      assert.equal(keyIdOf(r1.requestState), 1);
      await mcp.close();
      await useKeys(KEYS.oneAndNewActive); // new key 2 rolled out as active
      ({ mcp } = await connect({ autoFulfill: false }));
      const r2 = await round(mcp, { inputResponses: AMOUNT, requestState: r1.requestState });
      assert.equal(keyIdOf(r2.requestState), 1);
      await mcp.close();
      await useKeys(KEYS.newPrimary); // key 2 promoted; key 1 still verifies
      ({ mcp } = await connect({ autoFulfill: false }));
      const r3 = await round(mcp, { inputResponses: CONFIRM, requestState: r2.requestState });
      assert.deepEqual(r3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
      const fresh = await round(mcp);
      assert.equal(keyIdOf(fresh.requestState), 2);
      await mcp.close();
      await useKeys(KEYS.oldRetired); // key 1 cut off
      ({ mcp } = await connect({ autoFulfill: false }));
      await assert.rejects(round(mcp, { inputResponses: CONFIRM, requestState: r2.requestState }), invalidState);
      await assert.rejects(testCodec({ keys: KEYS.oldRetired }).verify(r2.requestState, CTX), (e) => e.reason === 'retired_key');
      // Key 2's in-flight token still works.
      const f2 = await round(mcp, { inputResponses: AMOUNT, requestState: fresh.requestState });
      assert.equal(f2.resultType, 'input_required');
    } finally {
      await mcp.close();
      await useKeys(KEYS.one);
    }
  });
});
