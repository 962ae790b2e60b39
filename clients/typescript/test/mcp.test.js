// The MCP SDK drop-in (src/mcp.ts) on the real SDK, @modelcontextprotocol/server
// and /client 2.4.0: bind on McpServer and on Server, calls served through
// createMcpHandler (the modern, per-request path, in process over the Fetch API)
// and over one long-lived in-memory connection (the 2025 era, the SDK's legacy
// shim, one server serving concurrent calls); asking again; refusals and where
// their reasons go; the step of a round; the defaults of issue 26 item 5.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { McpServer, Server, createMcpHandler, fromJsonSchema, inputRequired, acceptedContent, InMemoryTransport } from '@modelcontextprotocol/server';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Codec, Keyring, ReqstateError, callContext, createRequestStateCodec, stepOfInputRequests } from '../dist/index.js';

const secret = (seed) => Buffer.alloc(32, seed).toString('base64');
const KEYS = `1:primary:${secret(1)}`;
const reason = (r) => (e) => e instanceof ReqstateError && e.reason === r;
const FROZEN = { code: -32602, message: 'Invalid or expired requestState', data: { reason: 'invalid_request_state' } };
const OBJ = fromJsonSchema({ type: 'object', properties: { n: { type: 'number' } } });
const elicit = (message) => inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } } });
const yes = { action: 'accept', content: { ok: true } };

/** A codec and what it reported: onRefusal events and the servers' onerror messages. */
function setup(extra = {}) {
  const refusals = [];
  const errors = [];
  const logs = [];
  let now = Math.floor(Date.now() / 1000);
  const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', onRefusal: (r) => refusals.push(r), log: (l) => logs.push(l), clock: () => now, ...extra });
  return { rs, refusals, errors, logs, clock: { set: (t) => (now = t), get: () => now } };
}

/**
 * An McpServer with the tools the tests call: `three` asks a, b and c in one
 * round and asks again for what is missing; `add` asks `confirm`; `other`
 * is another tool with the same shape.
 */
function mcpServer(env, { low = false } = {}) {
  const handler = (name) => async (args, ctx) => {
    const state = ctx.mcpReq.requestState();
    if (!state) {
      const keys = name === 'three' ? ['a', 'b', 'c'] : ['confirm'];
      return env.rs.inputRequired(ctx, { inputRequests: Object.fromEntries(keys.map((k) => [k, elicit(`${name} ${k}?`)])), state: { n: args.n, keys } });
    }
    const missing = env.rs.unanswered(ctx);
    if (missing === null || missing.length > 0) {
      env.askedAgain?.push(missing);
      const keys = missing ?? state.keys;
      return env.rs.inputRequired(ctx, { inputRequests: Object.fromEntries(keys.map((k) => [k, elicit(`${name} ${k} again?`)])), state });
    }
    const answers = state.keys.map((k) => `${k}=${acceptedContent(ctx.mcpReq.inputResponses, k)?.ok}`);
    return { content: [{ type: 'text', text: `${name} n=${state.n} ${answers.join(' ')}` }] };
  };
  if (low) {
    // The low-level Server (deprecated in 2.4.0 but supported): tools/call by hand.
    const server = new Server({ name: 'low', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', async () => ({ tools: ['add', 'three', 'other'].map((name) => ({ name, inputSchema: { type: 'object' } })) }));
    server.setRequestHandler('tools/call', async (request, ctx) => handler(request.params.name)(request.params.arguments ?? {}, ctx));
    server.onerror = (e) => env.errors.push(e.message);
    return env.rs.bind(server);
  }
  const server = new McpServer({ name: 'high', version: '1' }, { capabilities: { tools: {} } });
  for (const name of ['add', 'three', 'other']) server.registerTool(name, { inputSchema: OBJ }, handler(name));
  server.server.onerror = (e) => env.errors.push(e.message);
  return env.rs.bind(server);
}

/** A client of a createMcpHandler served in process (Fetch API), as `user` (the token's subject, of one OAuth client) or unauthenticated. */
async function httpClient(env, { low = false, user } = {}) {
  const handler = createMcpHandler(() => mcpServer(env, { low }), { legacy: 'reject' });
  const fetch = (url, init) => {
    const req = new Request(url, init);
    return handler.fetch(req, user ? { authInfo: { token: user, clientId: 'test-client', scopes: [], extra: { sub: user } } } : undefined);
  };
  const mcp = new Client(
    { name: 't', version: '0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } },
  );
  await mcp.connect(new StreamableHTTPClientTransport(new URL('http://in-process/mcp'), { fetch }));
  return mcp;
}

const call = (mcp, name, args, over = {}) => mcp.callTool({ name, arguments: args, ...over }, { allowInputRequired: true });
const wireError = async (promise) => {
  try {
    await promise;
  } catch (e) {
    return { code: e.code, message: e.message, data: e.data };
  }
  assert.fail('no error');
};
const flip = (token, i) => token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
const plain = new Codec({ keyring: KEYS });
// An unauthenticated call binds the principal `null` (docs/MCP.md, "The caller a round is bound to").
const bound = (tool, args, principal = 'null', method = 'tools/call') => ({ tool, context: callContext({ principal, audience: 'test', method, arguments: args }) });

describe('bind on McpServer and on Server, served by createMcpHandler', () => {
  for (const low of [false, true]) {
    test(`${low ? 'Server' : 'McpServer'}: rounds bound to the call; asking again; complete`, async () => {
      const env = { ...setup(), askedAgain: [] };
      const mcp = await httpClient(env, { low });
      try {
        const r1 = await call(mcp, 'three', { n: 3 });
        assert.equal(r1.resultType, 'input_required');
        assert.deepEqual(Object.keys(r1.inputRequests).sort(), ['a', 'b', 'c']);
        // The token: the asked keys as its step, the handler's state and nothing else, bound to the call.
        const v = plain.verify(r1.requestState, bound('three', { n: 3 }));
        assert.equal(v.step, '["a","b","c"]');
        assert.deepEqual(v.state, { n: 3, keys: ['a', 'b', 'c'] });
        assert.throws(() => plain.verify(r1.requestState, bound('three', { n: 4 })), reason('authentication_failed'));
        // Missing, partial and wrong-key answers are asked again (never -32602).
        const noAnswers = await call(mcp, 'three', { n: 3 }, { requestState: r1.requestState });
        assert.equal(noAnswers.resultType, 'input_required');
        const partial = await call(mcp, 'three', { n: 3 }, { requestState: r1.requestState, inputResponses: { b: yes } });
        assert.equal(partial.resultType, 'input_required');
        assert.deepEqual(Object.keys(partial.inputRequests).sort(), ['a', 'c']);
        assert.equal(plain.verify(partial.requestState, bound('three', { n: 3 })).step, '["a","c"]');
        const wrongKey = await call(mcp, 'three', { n: 3 }, { requestState: r1.requestState, inputResponses: { x: yes, y: yes, z: yes } });
        assert.equal(wrongKey.resultType, 'input_required');
        assert.deepEqual(env.askedAgain, [['a', 'b', 'c'], ['a', 'c'], ['a', 'b', 'c']]);
        // All three answered (an extra key is ignored): complete.
        const done = await call(mcp, 'three', { n: 3 }, { requestState: r1.requestState, inputResponses: { a: yes, b: yes, c: yes, extra: yes } });
        assert.deepEqual(done.content, [{ type: 'text', text: 'three n=3 a=true b=true c=true' }]);
        assert.deepEqual([env.refusals, env.errors], [[], []]);
      } finally {
        await mcp.close();
      }
    });
  }

  test('refusals: the wire gets the frozen -32602 only; the reason reaches onRefusal and server.onerror', async () => {
    const env = setup();
    const mcp = await httpClient(env);
    const bob = await httpClient(env, { user: 'bob' });
    try {
      const r1 = await call(mcp, 'add', { n: 1 });
      const ok = await call(mcp, 'add', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } });
      assert.deepEqual(ok.content, [{ type: 'text', text: 'add n=1 confirm=true' }]);
      const other = setup({ keyring: `9:primary:${secret(9)}` });
      const foreign = await other.rs.inputRequired(
        { mcpReq: { method: 'tools/call', signal: new AbortController().signal } },
        { inputRequests: { confirm: {} }, state: { n: 1, keys: ['confirm'] } },
      ).catch((e) => e);
      assert.ok(reason('invalid_argument')(foreign), 'a ctx the codec never saw');
      const unknownKey = await createRequestStateCodec({ keyring: `9:primary:${secret(9)}`, audience: 'test', call: { tool: 'add', arguments: { n: 1 } } }).inputRequired(
        { mcpReq: { method: 'tools/call', signal: new AbortController().signal } },
        { inputRequests: { confirm: {} }, state: { n: 1, keys: ['confirm'] } },
      );
      const cases = [
        ['another tool', () => call(mcp, 'other', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } }), 'authentication_failed', 'other'],
        ['changed arguments', () => call(mcp, 'add', { n: 2 }, { requestState: r1.requestState, inputResponses: { confirm: yes } }), 'authentication_failed', 'add'],
        ['another principal', () => call(bob, 'add', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } }), 'authentication_failed', 'add'],
        ['flipped byte', () => call(mcp, 'add', { n: 1 }, { requestState: flip(r1.requestState, 30), inputResponses: { confirm: yes } }), 'authentication_failed', 'add'],
        ['unknown key', () => call(mcp, 'add', { n: 1 }, { requestState: unknownKey.requestState, inputResponses: { confirm: yes } }), 'unknown_key', 'add'],
        ['not a token', () => call(mcp, 'add', { n: 1 }, { requestState: 'hello', inputResponses: { confirm: yes } }), 'malformed', 'add'],
      ];
      for (const [name, run, why, tool] of cases) {
        env.refusals.length = 0;
        env.errors.length = 0;
        env.logs.length = 0;
        const wire = await wireError(run());
        assert.deepEqual(wire, FROZEN, name);
        assert.equal(env.refusals.length, 1, name);
        const [r] = env.refusals;
        assert.deepEqual([r.reason, r.method, r.tool], [why, 'tools/call', tool], name);
        assert.ok(r.message.startsWith(`${why}: `), r.message);
        assert.deepEqual(env.errors, [`requestState verification rejected tools/call: ${r.message}`], name);
        // The operator's line, as the Python drop-in writes it.
        assert.deepEqual(env.logs, [`reqstate refused tools/call "${tool}": ${r.message}`], name);
        // Never the state, the arguments or the principal in the message.
        assert.doesNotMatch(r.message, /bob|"n"|keys/, name);
      }
      assert.match(env.refusals[0].message, /^malformed: /);
      // Expiry: the codec's clock moved past ttl + leeway.
      env.refusals.length = 0;
      env.clock.set(env.clock.get() + 600 + 60);
      assert.deepEqual(await wireError(call(mcp, 'add', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } })), FROZEN);
      assert.equal(env.refusals[0].reason, 'expired');
      assert.match(env.refusals[0].message, /^expired: the token for tools\/call "add" has expired \(a token is accepted for its ttl \+ the clock leeway of 60 s\)$/);
    } finally {
      await mcp.close();
      await bob.close();
    }
  });

  test("incomplete: 'refuse' refuses an incomplete round (wrong_step); a throwing onRefusal changes nothing", async () => {
    const env = setup({ incomplete: 'refuse' });
    const seen = env.refusals;
    env.rs = createRequestStateCodec({
      keyring: KEYS,
      audience: 'test',
      incomplete: 'refuse',
      onRefusal: (r) => {
        seen.push(r);
        throw new Error('a broken hook');
      },
    });
    const mcp = await httpClient(env);
    try {
      const r1 = await call(mcp, 'three', { n: 3 });
      assert.deepEqual(await wireError(call(mcp, 'three', { n: 3 }, { requestState: r1.requestState, inputResponses: { a: yes } })), FROZEN);
      assert.equal(seen[0].reason, 'wrong_step');
      assert.equal(seen[0].message, 'wrong_step: the token for tools/call "three" asked for other input than this request answers');
      const done = await call(mcp, 'three', { n: 3 }, { requestState: r1.requestState, inputResponses: { a: yes, b: yes, c: yes } });
      assert.equal(done.content[0].text, 'three n=3 a=true b=true c=true');
    } finally {
      await mcp.close();
    }
  });
});

describe('one server, one long-lived connection (2025 era, the SDK legacy shim)', () => {
  test('two concurrent calls to different tools each bind their own call', async () => {
    const env = setup();
    const minted = [];
    let arrived = 0;
    let release;
    const both = new Promise((r) => (release = r));
    const server = new McpServer({ name: 'one', version: '1' }, { capabilities: { tools: {} } });
    for (const name of ['left', 'right']) {
      server.registerTool(name, { inputSchema: OBJ }, async (args, ctx) => {
        const state = ctx.mcpReq.requestState();
        if (!state) {
          // Both calls are in flight before either mints.
          if (++arrived === 2) release();
          await both;
          const r = await env.rs.inputRequired(ctx, { inputRequests: { confirm: elicit(`${name}?`) }, state: { n: args.n } });
          minted.push([name, args.n, r.requestState]);
          return r;
        }
        assert.deepEqual(env.rs.unanswered(ctx), []);
        return { content: [{ type: 'text', text: `${name} ${state.n} ${acceptedContent(ctx.mcpReq.inputResponses, 'confirm')?.ok}` }] };
      });
    }
    server.server.onerror = (e) => env.errors.push(e.message);
    env.rs.bind(server);
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    // A hook of the caller's own on the transport before connect: the SDK chains it, and it still sees every message.
    const hooked = [];
    serverSide.onmessage = (m) => hooked.push(m.method ?? 'response');
    await server.connect(serverSide);
    const mcp = new Client({ name: 't', version: '0' }, { capabilities: { elicitation: { form: {} } } });
    mcp.setRequestHandler('elicitation/create', async () => yes);
    await mcp.connect(clientSide);
    try {
      const [l, r] = await Promise.all([mcp.callTool({ name: 'left', arguments: { n: 1 } }), mcp.callTool({ name: 'right', arguments: { n: 2 } })]);
      assert.deepEqual([l.content[0].text, r.content[0].text], ['left 1 true', 'right 2 true']);
      assert.equal(minted.length, 2);
      assert.equal(hooked.filter((m) => m === 'tools/call').length, 2);
      for (const [name, n, token] of minted) {
        assert.deepEqual(plain.verify(token, bound(name, { n })).state, { n });
        assert.throws(() => plain.verify(token, bound(name === 'left' ? 'right' : 'left', { n })), reason('authentication_failed'));
      }
      assert.deepEqual([env.refusals, env.errors], [[], []]);
    } finally {
      await mcp.close();
    }
  });

  test('bind refuses another verifier, a connected server and what is not a server; binding twice is one binding', async () => {
    const { rs } = setup();
    const sdkHook = { verify: async () => 'x' };
    assert.throws(() => rs.bind(new McpServer({ name: 'x', version: '1' }, { requestState: sdkHook })), /refusing to replace someone else's verifier/);
    const own = new Server({ name: 'x', version: '1' }, { capabilities: { tools: {} }, requestState: { verify: rs.verify } });
    assert.equal(rs.bind(own), own);
    assert.equal(rs.bind(own), own);
    assert.throws(() => setup().rs.bind(own), /already bound to another/);
    assert.throws(() => rs.bind({ connect() {} }), /expected an McpServer or a Server of @modelcontextprotocol\/server 2\.x/);
    const connected = new McpServer({ name: 'x', version: '1' });
    await connected.connect(InMemoryTransport.createLinkedPair()[1]);
    assert.throws(() => rs.bind(connected), /already connected; bind it before connect/);
    await connected.close();
  });
});

describe('mint and its inputs', () => {
  test('mint without ctx, or with a ctx the codec never saw, throws invalid_argument at mint', async () => {
    const { rs } = setup();
    await assert.rejects(rs.mint({ step: 'a' }), (e) => reason('invalid_argument')(e) && /mint needs the handler's ctx/.test(e.message));
    await assert.rejects(rs.mint({ step: 'a' }, { mcpReq: { method: 'tools/call', signal: new AbortController().signal } }), (e) => reason('invalid_argument')(e) && /did not see this request/.test(e.message));
    await assert.rejects(rs.inputRequired(undefined, { inputRequests: {}, state: 1 }), reason('invalid_argument'));
  });

  test('ttl over the max lifetime fails at creation; clockLeewaySeconds sets the leeway (a token lives ttl + leeway)', async () => {
    assert.throws(() => createRequestStateCodec({ keyring: KEYS, ttlSeconds: 86401 }), (e) => reason('lifetime_too_long')(e) && /max lifetime of 86400 s/.test(e.message));
    assert.throws(() => createRequestStateCodec({ keyring: KEYS, ttlSeconds: 700, policy: { maxLifetime: 600 } }), reason('lifetime_too_long'));
    assert.throws(() => createRequestStateCodec({ keyring: KEYS, ttlSeconds: 0 }), reason('invalid_argument'));
    assert.throws(() => createRequestStateCodec({ keyring: KEYS, clockLeewaySeconds: 5, policy: { clockLeeway: 6 } }), reason('invalid_argument'));
    const ctx = { mcpReq: { method: 'tools/call', signal: new AbortController().signal } };
    for (const leeway of [0, 5]) {
      let now = 1_000_000;
      const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', ttlSeconds: 10, clockLeewaySeconds: leeway, clock: () => now, call: { tool: 't', arguments: {} } });
      const { requestState } = await rs.inputRequired(ctx, { inputRequests: {}, state: 'x' });
      now += 10 + leeway - 1;
      assert.equal(await rs.verify(requestState, ctx), 'x');
      now += 1;
      await assert.rejects(rs.verify(requestState, ctx), reason('expired'));
    }
  });

  test('a Date, nesting over the limit and a lone surrogate get clear errors', async () => {
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: { tool: 't', arguments: {} } });
    const ctx = { mcpReq: { method: 'tools/call', signal: new AbortController().signal } };
    const nest = (n) => (n === 0 ? 1 : { a: nest(n - 1) });
    await assert.rejects(rs.inputRequired(ctx, { inputRequests: {}, state: { when: new Date(0) } }), (e) => reason('state_encoding')(e) && /a Date at \$\.when: .*toISOString/.test(e.message));
    await assert.rejects(rs.mint({ step: 's', at: [new Date(0)] }, ctx), (e) => reason('state_encoding')(e) && /a Date at \$\.at\[0\]/.test(e.message));
    await rs.inputRequired(ctx, { inputRequests: {}, state: nest(16) });
    await assert.rejects(rs.inputRequired(ctx, { inputRequests: {}, state: nest(17) }), (e) => reason('state_encoding')(e) && /deeper than 16 levels/.test(e.message));
    // mint(payload) of a payload with no step field wraps it: one level less.
    await rs.mint(nest(15), ctx);
    await assert.rejects(rs.mint(nest(16), ctx), (e) => reason('state_encoding')(e) && /deeper than 15 levels .*envelope takes 1/.test(e.message));
    // Arguments with a lone surrogate: invalid_argument at mint and, as a refusal, at verify.
    const refusals = [];
    const lone = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: { tool: 't', arguments: { s: '\ud800' } }, onRefusal: (r) => refusals.push(r) });
    await assert.rejects(lone.inputRequired(ctx, { inputRequests: {}, state: 1 }), (e) => reason('invalid_argument')(e) && /lone surrogate/.test(e.message));
    const { requestState } = await rs.inputRequired(ctx, { inputRequests: {}, state: 1 });
    await assert.rejects(lone.verify(requestState, ctx), (e) => reason('invalid_argument')(e) && /^invalid_argument: .*lone surrogate/.test(e.message));
    assert.equal(refusals[0].reason, 'invalid_argument');
  });
});

describe('the step of a round (docs/MCP.md)', () => {
  test('keys deduplicated, sorted by UTF-8 bytes (astral after BMP), JSON-escaped', () => {
    assert.equal(stepOfInputRequests([]), '[]');
    assert.equal(stepOfInputRequests(['b', 'a', 'b']), '["a","b"]');
    // UTF-16 order would put U+1F600 (D83D DE00) before U+FFFD; UTF-8 order puts it after.
    assert.equal(stepOfInputRequests(['\u{1F600}', '\uFFFD', 'z', 'é']), '["z","é","\uFFFD","\u{1F600}"]');
    assert.equal(stepOfInputRequests(['\u0001', '"', '\\', '\n']), '["\\u0001","\\n","\\"","\\\\"]');
    assert.throws(() => stepOfInputRequests(['\ud800']), reason('invalid_argument'));
  });

  test('over 256 UTF-8 bytes: sha256: and the base64url of the text\'s SHA-256', () => {
    // ["k…"]: 4 bytes of brackets and quotes, so a 252-byte key is exactly 256.
    const at = 'k'.repeat(252);
    assert.equal(stepOfInputRequests([at]), `["${at}"]`);
    const over = ['é'.repeat(126) + 'k']; // 253 bytes of key: 257 in all
    const text = `["${over[0]}"]`;
    assert.equal(Buffer.byteLength(text), 257);
    assert.equal(stepOfInputRequests(over), `sha256:${createHash('sha256').update(text).digest('base64url')}`);
  });

  test('a round under a sha256: step: complete when the answers make the step, else unanswered is null', async () => {
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: { tool: 't', arguments: {} } });
    const keys = Array.from({ length: 30 }, (_, i) => `question-${i}`);
    const asked = Object.fromEntries(keys.map((k) => [k, {}]));
    const ctx = (inputResponses) => ({ mcpReq: { method: 'tools/call', signal: new AbortController().signal, inputResponses } });
    const first = ctx();
    const { requestState } = await rs.inputRequired(first, { inputRequests: asked, state: 7 });
    assert.match(plain.verify(requestState, { tool: 't', context: callContext({ principal: 'null', audience: 'test', method: 'tools/call', arguments: {} }) }).step, /^sha256:[A-Za-z0-9_-]{43}$/);
    const all = ctx(Object.fromEntries(keys.map((k) => [k, yes])));
    assert.equal(await rs.verify(requestState, all), 7);
    assert.deepEqual(rs.unanswered(all), []);
    const some = ctx({ 'question-1': yes });
    assert.equal(await rs.verify(requestState, some), 7);
    assert.equal(rs.unanswered(some), null);
    // A first round (nothing verified): nothing unanswered.
    assert.deepEqual(rs.unanswered(first), []);
  });
});

describe('the operator\'s lines (issue 40 item 4)', () => {
  const tampered = async (options) => {
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', ...options });
    const env = { rs, errors: [] };
    const handler = createMcpHandler(() => mcpServer(env), { legacy: 'reject' });
    const fetch = (url, init) => handler.fetch(new Request(url, init));
    const mcp = new Client({ name: 't', version: '0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } });
    await mcp.connect(new StreamableHTTPClientTransport(new URL('http://in-process/mcp'), { fetch }));
    try {
      const r1 = await call(mcp, 'add', { n: 1 });
      assert.deepEqual(await wireError(call(mcp, 'add', { n: 1 }, { requestState: flip(r1.requestState, 30), inputResponses: { confirm: yes } })), FROZEN);
    } finally {
      await mcp.close();
    }
  };
  const capturingConsole = async (f) => {
    const lines = [];
    const original = console.error;
    console.error = (...a) => lines.push(a.join(' '));
    try {
      await f();
    } finally {
      console.error = original;
    }
    return lines;
  };

  test('by default a refusal is one line on console.error, with no onRefusal and no onerror set', async () => {
    const lines = await capturingConsole(() => tampered({}));
    assert.equal(lines.length, 1, lines.join('\n'));
    assert.match(lines[0], /^reqstate refused tools\/call "add": authentication_failed: the token does not verify for tools\/call "add" as called/);
  });

  test('log: false is silent; a log function gets the line; a throwing one changes nothing; anything else is refused', async () => {
    assert.deepEqual(await capturingConsole(() => tampered({ log: false })), []);
    const got = [];
    assert.deepEqual(await capturingConsole(() => tampered({ log: (l) => got.push(l) })), []);
    assert.equal(got.length, 1);
    assert.match(got[0], /^reqstate refused tools\/call "add": authentication_failed: /);
    await tampered({ log: () => { throw new Error('broken logger'); } });
    for (const log of [true, 'stderr', {}]) assert.throws(() => createRequestStateCodec({ keyring: KEYS, log }), reason('invalid_argument'));
  });

  test('a 2025-era client of a stateless server is told what to do, and the operator too', async () => {
    const logs = [];
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', log: (l) => logs.push(l) });
    const env = { rs, errors: [] };
    const handler = createMcpHandler(() => mcpServer(env));
    const fetch = (url, init) => handler.fetch(new Request(url, init));
    const legacy = new Client({ name: 't', version: '0' }, { capabilities: { elicitation: { form: {} } } });
    await legacy.connect(new StreamableHTTPClientTransport(new URL('http://in-process/mcp'), { fetch }));
    try {
      const r = await legacy.callTool({ name: 'add', arguments: { n: 1 } });
      assert.equal(r.isError, true);
      assert.match(r.content[0].text, /^This call needs input from the client \(an input_required round\), and this client connected with a 2025-era protocol .*MCP protocol 2026-07-28 .*versionNegotiation: \{ mode: 'auto' \}/);
      assert.equal(logs.length, 1);
      assert.match(logs[0], /^reqstate could not ask for input in tools\/call "add": this client connected with a 2025-era protocol/);
    } finally {
      await legacy.close();
    }
  });

  test('a codec used with `call` (no bound server) needs an audience (issue 50 item 4)', () => {
    assert.throws(
      () => createRequestStateCodec({ keyring: KEYS, call: { tool: 't', arguments: {} } }),
      (e) => e.reason === 'invalid_argument' && /needs `audience`/.test(e.message),
    );
    assert.doesNotThrow(() => createRequestStateCodec({ keyring: KEYS, audience: 'billing', call: { tool: 't', arguments: {} } }));
  });

  test('undefined keyring (an unset REQSTATE_KEYS) names keys new', () => {
    assert.throws(() => createRequestStateCodec({ keyring: undefined }), (e) => e.reason === 'invalid_keyring' && /npx reqstate-ts keys new/.test(e.message));
  });
});
