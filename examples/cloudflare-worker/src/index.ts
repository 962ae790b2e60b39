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
// Nothing is kept between requests: each HTTP request builds a fresh server
// (createMcpHandler), and what the next round needs travels in the token,
// bound to the tool, the step, the caller, the method and the arguments.
import { createMcpHandler, inputRequired, acceptedContent, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import { Keyring, createRequestStateCodec, mcpCallOf, stepFromInputResponses, type McpRequestStateCodec } from '@reqstate/codec';

export interface Env {
  /** The keyring, compact form or TOML with inline secrets (a Worker secret). */
  REQSTATE_KEYS: string;
}

type CounterRequestState = { step: 'amount'; current: number } | { step: 'confirm'; current: number; amount: number };

const AUDIENCE = 'counter-worker';

// The parsed keyring is kept per isolate, keyed by the binding's text, so a
// rotated secret takes effect on the next request without a redeploy.
let cached: { text: string; keyring: Keyring } | undefined;
function keyringOf(env: Env): Keyring {
  if (cached?.text !== env.REQSTATE_KEYS) cached = { text: env.REQSTATE_KEYS, keyring: Keyring.parse(env.REQSTATE_KEYS) };
  return cached.keyring;
}

const TOOLS = [
  {
    name: 'increase-counter',
    description: 'Asks by how much, asks for confirmation, then returns the increased value.',
    inputSchema: { type: 'object' as const, properties: { current: { type: 'number' } }, required: ['current'] },
  },
];

function createServer(requestStateCodec: McpRequestStateCodec<CounterRequestState>): Server {
  const server = new Server(
    { name: 'mcp-elicitation-mrtr', version: '0.1.0' },
    { capabilities: { tools: {} }, requestState: { verify: requestStateCodec.verify } },
  );
  server.setRequestHandler('tools/list', async () => ({ tools: TOOLS }));
  server.setRequestHandler('tools/call', async (request, context) => {
    if (request.params.name !== 'increase-counter') throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
    const current = Number((request.params.arguments as { current?: unknown } | undefined)?.current);
    if (!Number.isFinite(current)) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'current must be a number');
    // Already verified by requestStateCodec.verify (the SDK's requestState seam).
    const state = context.mcpReq.requestState<CounterRequestState>();

    if (!state) {
      return inputRequired({
        inputRequests: {
          amount: inputRequired.elicit({
            message: 'By how much should the counter increase?',
            requestedSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
          }),
        },
        requestState: await requestStateCodec.mint({ step: 'amount', current }, context),
      });
    }

    if (state.step === 'amount') {
      const amount = Number(acceptedContent(context.mcpReq.inputResponses, 'amount')?.amount);
      if (!Number.isFinite(amount)) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'amount must be a number');
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: `Increase the counter from ${state.current} by ${amount}?`,
            requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] },
          }),
        },
        requestState: await requestStateCodec.mint({ step: 'confirm', current: state.current, amount }, context),
      });
    }

    const confirmed = acceptedContent(context.mcpReq.inputResponses, 'confirm')?.confirm === true;
    if (!confirmed) return { content: [{ type: 'text', text: `The counter stays at ${state.current}.` }] };
    return { content: [{ type: 'text', text: `The counter is now ${state.current + state.amount}.` }] };
  });
  return server;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname !== '/mcp') return new Response('Not found', { status: 404 });
    // The tool and arguments this request is about, read once from its body:
    // every token is bound to them (and to the caller and the method).
    const body: unknown = request.method === 'POST' ? await request.json().catch(() => undefined) : undefined;
    const requestStateCodec = createRequestStateCodec<CounterRequestState>({
      keyring: keyringOf(env),
      call: mcpCallOf(body) ?? { tool: '-', arguments: {} },
      audience: AUDIENCE,
      // The step names are the keys of the input each round asked for.
      expectedStep: stepFromInputResponses,
    });
    const handler = createMcpHandler(() => createServer(requestStateCodec), { legacy: 'reject' });
    return handler.fetch(request, { parsedBody: body });
  },
};
