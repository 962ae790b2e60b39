// The seed 000 `whoami` handler, re-entrant, on plain Node (node:http, a
// minimal JSON-RPC `tools/call` endpoint standing in for h3-mcp's
// defineMcpTool). Its `signedState()` is a reqstate token from
// @reqstate/codec: encrypted, expiring, bound to the tool, the step, the
// caller and the arguments, and verified on the retry before the answer is
// trusted. Keys: REQSTATE_KEYS (compact form or TOML, docs/KEYRING.md).
//
//   REQSTATE_KEYS="1:primary:$(head -c 32 /dev/urandom | base64)" node server.js
import http from 'node:http';
import { Codec, ReqstateError, callContext } from '@reqstate/codec';

/** The handler in the MCP multi-round-trip shape: `event.context.mcp` carries inputResponses and requestState. */
export function defineWhoami(codec, { audience = 'whoami-server' } = {}) {
  const bind = (event) =>
    callContext({ principal: event.context.principal, audience, method: 'tools/call', arguments: event.context.mcp.arguments ?? {} });
  // signedState(): the state of this round, as a reqstate token.
  const signedState = (event) => codec.mint({ tool: 'whoami', step: 'username', state: { asked: true }, ttl: 600, context: bind(event) }).token;
  return {
    name: 'whoami',
    handler: (event) => {
      const mcp = event.context.mcp;
      const answer = mcp?.inputResponses?.username;
      // The answer is only trusted on the retry of a round this server opened: verify first.
      let resumed = false;
      if (typeof mcp?.requestState === 'string') {
        codec.verify(mcp.requestState, { tool: 'whoami', context: bind(event), expectedStep: 'username' }); // throws ReqstateError
        resumed = true;
      }
      if (!resumed || !answer?.content?.name) {
        return {
          resultType: 'input_required',
          inputRequests: { username: { method: 'elicitation/create', params: { mode: 'form', message: 'What is your name?' } } },
          requestState: signedState(event),
        };
      }
      return { content: [{ type: 'text', text: `Hello, ${answer.content.name}!` }] };
    },
  };
}

/** A tiny JSON-RPC endpoint: POST /mcp with `tools/call`; principal from `x-user` (stand-in for real auth). */
export function createServer(codec) {
  const whoami = defineWhoami(codec);
  return http.createServer(async (req, res) => {
    const reply = (id, body) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
    };
    let msg;
    try {
      let text = '';
      for await (const chunk of req) text += chunk;
      msg = JSON.parse(text);
    } catch {
      return reply(null, { error: { code: -32700, message: 'Parse error' } });
    }
    if (req.url !== '/mcp' || msg.method !== 'tools/call' || msg.params?.name !== 'whoami') {
      return reply(msg.id ?? null, { error: { code: -32601, message: 'Method not found' } });
    }
    const event = {
      context: {
        principal: String(req.headers['x-user'] ?? 'anonymous'),
        mcp: { arguments: msg.params.arguments ?? {}, inputResponses: msg.params.inputResponses, requestState: msg.params.requestState },
      },
    };
    try {
      reply(msg.id, { result: whoami.handler(event) });
    } catch (e) {
      if (e instanceof ReqstateError) return reply(msg.id, { error: { code: -32602, message: 'Invalid or expired requestState', data: { reason: e.reason } } });
      reply(msg.id, { error: { code: -32603, message: 'Internal error' } });
    }
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createServer(new Codec({ keyring: process.env.REQSTATE_KEYS ?? '' }));
  server.listen(Number(process.env.PORT ?? 8788), () => console.log(`whoami on http://localhost:${server.address().port}/mcp`));
}
