// The stateless `increase-counter` Worker (three rounds: amount,
// confirm, result) on the MCP TypeScript SDK v2 Web-standard transport, with
// requestState minted and verified in-process by @reqstate/codec.
//
// Keys come from one secret binding, REQSTATE_KEYS, in the compact keyring
// form (docs/KEYRING.md, "The compact form"):
//   wrangler secret put REQSTATE_KEYS      # e.g. 1:primary:<base64 of 32 random bytes>
// Rotation is a new value of that secret (add a key as active, make it
// primary, retire the old one): no code change.
//
// Nothing is kept between requests: each HTTP request is served by a fresh
// server (createMcpHandler's factory), bound to the isolate's one codec, and
// what the next round needs travels in the token, bound to the tool, the
// arguments, the caller, the method and the input the round asked for.
import { createMcpHandler, inputRequired, acceptedContent, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import { createRequestStateCodec, type McpRequestStateCodec } from '@reqstate/codec';

export interface Env {
  /** The keyring, compact form or TOML with inline secrets (a Worker secret). */
  REQSTATE_KEYS: string;
}

/** What each round leaves for the next: which question it asked, and the values so far. */
type CounterState = { stage: 'amount'; current: number } | { stage: 'confirm'; current: number; amount: number };

const AUDIENCE = 'counter-worker';

const TOOLS = [
  {
    name: 'increase-counter',
    description: 'Asks by how much, asks for confirmation, then returns the increased value.',
    inputSchema: { type: 'object' as const, properties: { current: { type: 'number' } }, required: ['current'] },
  },
];

const askAmount = () => ({
  amount: inputRequired.elicit({
    message: 'By how much should the counter increase?',
    requestedSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
  }),
});
const askConfirm = (current: number, amount: number) => ({
  confirm: inputRequired.elicit({
    message: `Increase the counter from ${current} by ${amount}?`,
    requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] },
  }),
});

function createServer(requestState: McpRequestStateCodec<CounterState>): Server {
  const server = new Server({ name: 'mcp-elicitation-mrtr', version: '0.1.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', async () => ({ tools: TOOLS }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    if (request.params.name !== 'increase-counter') throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
    const current = Number((request.params.arguments as { current?: unknown } | undefined)?.current);
    if (!Number.isFinite(current)) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'current must be a number');
    // Verified before this handler ran (the SDK's requestState seam, installed by bind).
    const state = ctx.mcpReq.requestState<CounterState>();
    if (!state) return requestState.inputRequired(ctx, { inputRequests: askAmount(), state: { stage: 'amount', current } });

    // A retry that does not answer what its round asked is asked again (SEP-2322).
    const unanswered = requestState.unanswered(ctx);
    if (unanswered === null || unanswered.length > 0) {
      const again = state.stage === 'amount' ? askAmount() : askConfirm(state.current, state.amount);
      return requestState.inputRequired(ctx, { inputRequests: again, state });
    }

    // Answers are read only under the key this state's round asked.
    if (state.stage === 'amount') {
      const amount = Number(acceptedContent(ctx.mcpReq.inputResponses, 'amount')?.amount);
      if (!Number.isFinite(amount)) return requestState.inputRequired(ctx, { inputRequests: askAmount(), state });
      return requestState.inputRequired(ctx, { inputRequests: askConfirm(state.current, amount), state: { stage: 'confirm', current: state.current, amount } });
    }
    const confirmed = acceptedContent(ctx.mcpReq.inputResponses, 'confirm')?.confirm === true;
    if (!confirmed) return { content: [{ type: 'text', text: `The counter stays at ${state.current}.` }] };
    return { content: [{ type: 'text', text: `The counter is now ${state.current + state.amount}.` }] };
  });
  return server;
}

// One codec and one handler per isolate, keyed by the binding's text, so a
// rotated secret takes effect on the next request without a redeploy.
let cached: { text: string; handler: ReturnType<typeof createMcpHandler> } | undefined;
function handlerOf(env: Env) {
  if (cached?.text !== env.REQSTATE_KEYS) {
    const requestState = createRequestStateCodec<CounterState>({ keyring: env.REQSTATE_KEYS, audience: AUDIENCE });
    const handler = createMcpHandler(() => requestState.bind(createServer(requestState)), { legacy: 'reject' });
    cached = { text: env.REQSTATE_KEYS, handler };
  }
  return cached.handler;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname !== '/mcp') return new Response('Not found', { status: 404 });
    return handlerOf(env).fetch(request);
  },
};
