// The MCP drop-in's identity rules (issue 37 items 1 and 4, and its default
// audience): the caller a round is bound to (tests/vectors/mcp_principals.json,
// shared with the Python drop-in), how a refusal quotes the client's tool name
// (tests/vectors/mcp_log_names.json), and the server's name as the default
// audience; each also end to end on the real SDK 2.4.0.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { McpServer, Server, createMcpHandler, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Codec, ReqstateError, callContext, createRequestStateCodec } from '../dist/index.js';
// Not (yet) re-exported by the package's entry point: the module itself.
import { logName } from '../dist/mcp.js';

const vectors = (name) => JSON.parse(readFileSync(new URL(`../../../tests/vectors/${name}`, import.meta.url), 'utf8'));
const PRINCIPALS = vectors('mcp_principals.json');
const LOG_NAMES = vectors('mcp_log_names.json');

const secret = (seed) => Buffer.alloc(32, seed).toString('base64');
const KEYS = `1:primary:${secret(1)}`;
const plain = new Codec({ keyring: KEYS });
const reason = (r) => (e) => e instanceof ReqstateError && e.reason === r;
const FROZEN = { code: -32602, message: 'Invalid or expired requestState', data: { reason: 'invalid_request_state' } };
const OBJ = fromJsonSchema({ type: 'object', properties: { n: { type: 'number' } } });
const CALL = { tool: 't', arguments: { n: 1 } };
const ASK = inputRequired.elicit({ message: 'ok?', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } } });

/** The SDK's AuthInfo as a token verifier returns it: issuer and subject as the JWT claims in `extra`. */
function authInfoOf(auth) {
  const extra = {};
  if ('issuer' in auth) extra.iss = auth.issuer;
  if ('subject' in auth) extra.sub = auth.subject;
  return { token: 'opaque', clientId: auth.client_id, scopes: [], extra };
}

/** A handler's ctx as the SDK builds it, for a codec given `call` (no bind). */
const ctxOf = (authInfo) => ({ mcpReq: { method: 'tools/call', signal: new AbortController().signal }, ...(authInfo === undefined ? {} : { http: { authInfo } }) });

/** Whether `token` verifies bound to exactly `principal` (the string given to callContext). */
const boundTo = (token, principal) => plain.verify(token, { tool: CALL.tool, context: callContext({ principal, audience: 'test', method: 'tools/call', arguments: CALL.arguments }) });

const wireError = async (promise) => {
  try {
    await promise;
  } catch (e) {
    return { code: e.code, message: e.message, data: e.data };
  }
  assert.fail('no error');
};

describe('the caller a round is bound to (tests/vectors/mcp_principals.json)', () => {
  test('every default case, through ctx.http.authInfo', async () => {
    assert.ok(PRINCIPALS.defaults.length >= 12);
    for (const c of PRINCIPALS.defaults) {
      const refusals = [];
      const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, onRefusal: (r) => refusals.push(r) });
      const ctx = ctxOf(c.auth === null ? undefined : authInfoOf(c.auth));
      if (c.expect_fail !== undefined) {
        assert.equal(c.expect_fail, 'no_subject', c.name);
        const names = (e) => reason('invalid_argument')(e) && /the access token of this call names no subject/.test(e.message) && /`sub` \(and `iss`\)/.test(e.message) && /principal: \(ctx\) =>/.test(e.message);
        await assert.rejects(rs.inputRequired(ctx, { inputRequests: {}, state: 1 }), names, c.name);
        await assert.rejects(rs.mint({ step: 's' }, ctx), names, c.name);
        // Verify refuses too (never binds the client alone), and says why to onRefusal.
        const other = await createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, principal: () => c.auth.client_id }).inputRequired(ctxOf(), { inputRequests: {}, state: 1 });
        await assert.rejects(rs.verify(other.requestState, ctx), names, c.name);
        assert.equal(refusals.length, 1, c.name);
        assert.match(refusals[0].message, /^invalid_argument: the access token of this call names no subject/, c.name);
        continue;
      }
      const { requestState } = await rs.inputRequired(ctx, { inputRequests: {}, state: 1 });
      assert.equal(boundTo(requestState, c.principal).state, 1, c.name);
      assert.equal(await rs.verify(requestState, ctx), 1, c.name);
      assert.deepEqual(refusals, [], c.name);
    }
  });

  test('every custom case, through a principal function', async () => {
    assert.ok(PRINCIPALS.custom.length >= 4);
    for (const c of PRINCIPALS.custom) {
      const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, principal: () => c.returned });
      const { requestState } = await rs.inputRequired(ctxOf(), { inputRequests: {}, state: 2 });
      assert.equal(boundTo(requestState, c.principal).state, 2, c.name);
    }
    // undefined is null too: no authenticated caller.
    const none = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, principal: () => undefined });
    assert.equal(boundTo((await none.inputRequired(ctxOf(), { inputRequests: {}, state: 3 })).requestState, 'null').state, 3);
  });

  test('no authentication, a default and a custom principal never bind the same caller', async () => {
    const make = (principal) => createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, principal });
    const anonymous = await make().inputRequired(ctxOf(), { inputRequests: {}, state: 1 });
    const named = { token: 'x', clientId: 'anonymous', scopes: [], extra: { sub: 'anonymous' } };
    await assert.rejects(make().verify(anonymous.requestState, ctxOf(named)), reason('authentication_failed'));
    await assert.rejects(make(() => 'anonymous').verify(anonymous.requestState, ctxOf()), reason('authentication_failed'));
    await assert.rejects(make(() => 'null').verify(anonymous.requestState, ctxOf()), reason('authentication_failed'));
    const alice = { token: 'x', clientId: 'app-1', scopes: [], extra: { sub: 'alice' } };
    const byDefault = await make().inputRequired(ctxOf(alice), { inputRequests: {}, state: 1 });
    await assert.rejects(make(() => '["app-1",null,"alice"]').verify(byDefault.requestState, ctxOf(alice)), reason('authentication_failed'));
  });

  test('an issuer or subject that is not a string, or a principal function returning one, is refused clearly', async () => {
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL });
    for (const [extra, claim] of [[{ iss: 5, sub: 'a' }, 'iss'], [{ sub: ['a'] }, 'sub'], [{ iss: 'i', sub: { id: 1 } }, 'sub']]) {
      await assert.rejects(
        rs.inputRequired(ctxOf({ token: 'x', clientId: 'app', scopes: [], extra }), { inputRequests: {}, state: 1 }),
        (e) => reason('invalid_argument')(e) && e.message.includes(`ctx.http.authInfo.extra.${claim} is a`) && /not a string/.test(e.message),
      );
    }
    await assert.rejects(rs.inputRequired(ctxOf({ token: 'x', scopes: [], extra: { sub: 'a' } }), { inputRequests: {}, state: 1 }), (e) => reason('invalid_argument')(e) && /clientId is absent, not a string/.test(e.message));
    const bad = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: CALL, principal: () => 42 });
    await assert.rejects(bad.inputRequired(ctxOf(), { inputRequests: {}, state: 1 }), (e) => reason('invalid_argument')(e) && /the principal function returned a number: return a string, or null/.test(e.message));
  });
});

/** A codec and an McpServer named `name` with a `confirm` tool that asks once, served by createMcpHandler. */
function served({ rs, name = 'counter', authInfo, lowLevelTools = false } = {}) {
  const errors = [];
  const server = lowLevelTools ? new Server({ name, version: '1' }, { capabilities: { tools: {} } }) : new McpServer({ name, version: '1' }, { capabilities: { tools: {} } });
  const handler = async (args, ctx) => {
    if (!ctx.mcpReq.requestState()) return rs.inputRequired(ctx, { inputRequests: { confirm: ASK }, state: { n: args.n } });
    return { content: [{ type: 'text', text: `done ${ctx.mcpReq.requestState().n}` }] };
  };
  if (lowLevelTools) {
    // Any tool name reaches the handler (and the codec's verify) as the client sent it.
    server.setRequestHandler('tools/list', async () => ({ tools: [] }));
    server.setRequestHandler('tools/call', async (request, ctx) => handler(request.params.arguments ?? {}, ctx));
    server.onerror = (e) => errors.push(e.message);
  } else {
    server.registerTool('confirm', { inputSchema: OBJ }, handler);
    server.server.onerror = (e) => errors.push(e.message);
  }
  rs.bind(server);
  return { server, errors };
}

/** An SDK client of a createMcpHandler serving `factory` in process, its requests authenticated as `authInfo` (or not). */
async function clientOf(factory, authInfo) {
  const handler = createMcpHandler(factory, { legacy: 'reject' });
  const fetch = (url, init) => handler.fetch(new Request(url, init), authInfo ? { authInfo } : undefined);
  const mcp = new Client({ name: 't', version: '0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } });
  await mcp.connect(new StreamableHTTPClientTransport(new URL('http://in-process/mcp'), { fetch }));
  return mcp;
}
const call = (mcp, name, args, over = {}) => mcp.callTool({ name, arguments: args, ...over }, { allowInputRequired: true });
const yes = { action: 'accept', content: { ok: true } };

describe('on the real SDK', () => {
  test("a round minted in alice's call is refused in bob's call (same OAuth client, other subject)", async () => {
    const refusals = [];
    const rs = createRequestStateCodec({ keyring: KEYS, onRefusal: (r) => refusals.push(r) });
    const user = (sub) => ({ token: `token-of-${sub}`, clientId: 'shared-public-client', scopes: [], extra: { iss: 'https://auth.example', sub } });
    const errors = [];
    const factory = () => {
      const s = served({ rs });
      s.server.server.onerror = (e) => errors.push(e.message);
      return s.server;
    };
    const alice = await clientOf(factory, user('alice'));
    const bob = await clientOf(factory, user('bob'));
    try {
      const r1 = await call(alice, 'confirm', { n: 1 });
      assert.equal(r1.resultType, 'input_required');
      assert.equal(
        plain.verify(r1.requestState, { tool: 'confirm', context: callContext({ principal: '["shared-public-client","https://auth.example","alice"]', audience: 'counter', method: 'tools/call', arguments: { n: 1 } }) }).step,
        '["confirm"]',
      );
      assert.deepEqual(await wireError(call(bob, 'confirm', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } })), FROZEN);
      assert.deepEqual(refusals.map((r) => r.reason), ['authentication_failed']);
      assert.doesNotMatch(refusals[0].message, /alice|bob|shared-public-client/);
      const done = await call(alice, 'confirm', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } });
      assert.deepEqual(done.content, [{ type: 'text', text: 'done 1' }]);
      // A token naming no subject: the call that would mint is refused, not bound to the client alone.
      const clientOnly = await clientOf(factory, { token: 'c', clientId: 'shared-public-client', scopes: [] });
      try {
        errors.length = 0;
        // McpServer answers a handler's throw as a tool error: no round, no requestState.
        const r = await call(clientOnly, 'confirm', { n: 1 });
        assert.equal(r.isError, true, 'no round is minted for a caller without a subject');
        assert.equal(r.requestState, undefined);
        assert.match(r.content[0].text, /names no subject/);
      } finally {
        await clientOnly.close();
      }
    } finally {
      await alice.close();
      await bob.close();
    }
  });

  test('a tool name with a newline reaches onRefusal and onerror quoted, on one line', async () => {
    const refusals = [];
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', onRefusal: (r) => refusals.push(r) });
    const errors = [];
    const factory = () => {
      const s = served({ rs, lowLevelTools: true });
      s.server.onerror = (e) => errors.push(e.message);
      return s.server;
    };
    const mcp = await clientOf(factory);
    try {
      const r1 = await call(mcp, 'plain', { n: 1 });
      assert.equal(r1.resultType, 'input_required');
      const forged = 'x\nWARNING reqstate refused tools/call "y": forged\r\u2028\u001b[31m';
      assert.deepEqual(await wireError(call(mcp, forged, { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } })), FROZEN);
      assert.equal(refusals.length, 1);
      const [r] = refusals;
      assert.equal(r.tool, forged, 'the structured field is the name as sent');
      const quoted = '"x\\u000aWARNING reqstate refused tools/call \\"y\\": forged\\u000d\\u2028\\u001b[31m"';
      assert.equal(r.message, `authentication_failed: the token does not verify for tools/call ${quoted} as called (its tool, arguments, method, principal or audience differ from the minting call, or it was altered)`);
      assert.deepEqual(errors, [`requestState verification rejected tools/call: ${r.message}`]);
      for (const line of [r.message, ...errors]) assert.match(line, /^[\x20-\x7e]*$/, 'printable ASCII only: no line break, no escape');
      // A long tool name (up to the format's 256 bytes): its first 64 characters and its length.
      refusals.length = 0;
      await wireError(call(mcp, '\u00e9'.repeat(128), { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } }));
      assert.equal(refusals.length, 1);
      assert.ok(refusals[0].message.includes(`tools/call "${'\\u00e9'.repeat(64)}"...(128 characters) as called`), refusals[0].message);
    } finally {
      await mcp.close();
    }
  });
});

describe('how a refusal quotes a client-supplied name (tests/vectors/mcp_log_names.json)', () => {
  test('every vector', () => {
    assert.ok(LOG_NAMES.names.length >= 11);
    for (const c of LOG_NAMES.names) {
      const input = c.repeat ? c.repeat.character.repeat(c.repeat.count) : c.input;
      const logged = logName(input);
      assert.equal(logged, c.logged, c.name);
      assert.match(logged, /^[\x20-\x7e]*$/, c.name);
    }
  });

  test('the message of every reason that names the tool quotes it', async () => {
    let now = 1_000_000;
    const name = 'a\nb';
    const refusals = [];
    const rs = createRequestStateCodec({ keyring: KEYS, audience: 'test', call: { tool: name, arguments: {} }, clock: () => now, onRefusal: (r) => refusals.push(r) });
    const ctx = ctxOf();
    const { requestState } = await rs.inputRequired(ctx, { inputRequests: { k: {} }, state: 1 });
    now += 600 + 60;
    await assert.rejects(rs.verify(requestState, ctx), reason('expired'));
    now -= 10_000;
    await assert.rejects(rs.verify(requestState, ctx), reason('not_yet_valid'));
    for (const r of refusals) {
      assert.ok(r.message.includes('tools/call "a\\u000ab"'), r.message);
      assert.match(r.message, /^[\x20-\x7e]*$/);
    }
    assert.equal(refusals.length, 2);
  });
});

describe('the default audience: the name of the server bound', () => {
  test('two servers with different names on one keyring refuse each other\'s round; the same name accepts it', async () => {
    const refusals = [];
    const rs = createRequestStateCodec({ keyring: KEYS, onRefusal: (r) => refusals.push(r) });
    const alpha = await clientOf(() => served({ rs, name: 'alpha' }).server);
    const beta = await clientOf(() => served({ rs, name: 'beta' }).server);
    const alphaAgain = await clientOf(() => served({ rs: createRequestStateCodec({ keyring: KEYS }), name: 'alpha' }).server);
    try {
      const r1 = await call(alpha, 'confirm', { n: 1 });
      assert.equal(r1.resultType, 'input_required');
      const ctxFor = (audience) => ({ tool: 'confirm', context: callContext({ principal: 'null', audience, method: 'tools/call', arguments: { n: 1 } }) });
      assert.equal(plain.verify(r1.requestState, ctxFor('alpha')).step, '["confirm"]');
      assert.throws(() => plain.verify(r1.requestState, ctxFor('')), reason('authentication_failed'));
      assert.deepEqual(await wireError(call(beta, 'confirm', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } })), FROZEN);
      assert.deepEqual(refusals.map((r) => r.reason), ['authentication_failed']);
      const done = await call(alphaAgain, 'confirm', { n: 1 }, { requestState: r1.requestState, inputResponses: { confirm: yes } });
      assert.deepEqual(done.content, [{ type: 'text', text: 'done 1' }]);
    } finally {
      await Promise.all([alpha.close(), beta.close(), alphaAgain.close()]);
    }
  });

  test('an explicit audience is used as given; a server with no name is refused at bind', async () => {
    const shared = createRequestStateCodec({ keyring: KEYS, audience: 'one-service' });
    const a = await clientOf(() => served({ rs: shared, name: 'replica-a' }).server);
    const b = await clientOf(() => served({ rs: shared, name: 'replica-b' }).server);
    try {
      const r1 = await call(a, 'confirm', { n: 2 });
      const done = await call(b, 'confirm', { n: 2 }, { requestState: r1.requestState, inputResponses: { confirm: yes } });
      assert.deepEqual(done.content, [{ type: 'text', text: 'done 2' }]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    const rs = createRequestStateCodec({ keyring: KEYS });
    for (const info of [{ name: '', version: '1' }, { version: '1' }]) {
      assert.throws(() => rs.bind(new McpServer(info, { capabilities: { tools: {} } })), /bind: the server has no name to bind its rounds to .*pass `audience`/);
      assert.throws(() => rs.bind(new Server(info, { capabilities: { tools: {} } })), /pass `audience` \(the name of this service\) to createRequestStateCodec/);
    }
    // With an audience, a nameless server binds.
    createRequestStateCodec({ keyring: KEYS, audience: 'svc' }).bind(new McpServer({ name: '', version: '1' }, { capabilities: { tools: {} } }));
    assert.throws(() => createRequestStateCodec({ keyring: KEYS, audience: 7 }), reason('invalid_argument'));
  });
});
