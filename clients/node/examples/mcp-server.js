// @ts-check
// examples/handlers.js wired into a real server of the official TypeScript MCP
// SDK (v2: @modelcontextprotocol/server, protocol revision 2026-07-28, which
// has `input_required` results). The handlers verify `requestState` through
// the reqstate sidecar themselves; a token that does not verify, or a
// single-use one already consumed (the confirmation, replayed), is answered
// with the SDK's own "Invalid or expired requestState" error (-32602).
import { ProtocolError, ProtocolErrorCode, Server, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import { mcpPrincipal } from '@reqstate/codec';
import { createHandlers, InvalidRequestStateError } from './handlers.js';

/** @type {import('@modelcontextprotocol/server').Tool[]} */
const TOOLS = [
  {
    name: 'whoami',
    description: 'Asks your name, then greets you.',
    inputSchema: { type: 'object', properties: {} },
  },
  {
    name: 'increase-counter',
    description: 'Asks by how much, asks for confirmation, then returns the increased value.',
    inputSchema: { type: 'object', properties: { current: { type: 'number' } }, required: ['current'] },
  },
];

/**
 * @param {{ client: import('@reqstate/client').Client, principalOf?: (ctx: any) => string, audience?: string, onCommit?: (current: number, amount: number) => void }} options
 *   `principalOf` names the caller from the request context (default:
 *   `mcpPrincipal` of @reqstate/codec, the drop-ins' rule, docs/MCP.md "The
 *   caller a round is bound to": `null` without authentication, else
 *   `[client, issuer, subject]`, refusing a token without a subject);
 *   `onCommit` is the effect of a
 *   confirmed increase (see handlers.js).
 */
export function createMcpServer({ client, principalOf, audience, onCommit }) {
  const handlers = /** @type {Record<string, (req: any) => Promise<any>>} */ (createHandlers({ client, audience, onCommit }));
  const server = new Server(
    { name: 'counter-server', version: '0.1.0' },
    {
      capabilities: { tools: {} },
      // Offer the revision with `input_required` results (2026-07-28) next to
      // the 2025 ones; the SDK's client negotiates it with `server/discover`.
      supportedProtocolVersions: ['2026-07-28', ...SUPPORTED_PROTOCOL_VERSIONS],
    },
  );
  server.setRequestHandler('tools/list', async () => ({ tools: TOOLS }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const handler = Object.hasOwn(handlers, request.params.name) ? handlers[request.params.name] : undefined;
    if (!handler) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
    const rawState = ctx.mcpReq.requestState();
    try {
      return await handler({
        arguments: request.params.arguments ?? {},
        inputResponses: ctx.mcpReq.inputResponses,
        requestState: typeof rawState === 'string' ? rawState : undefined,
        principal: principalOf ? principalOf(ctx) : mcpPrincipal(ctx),
        method: ctx.mcpReq.method,
      });
    } catch (err) {
      if (err instanceof InvalidRequestStateError) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid or expired requestState', {
          reason: 'invalid_request_state',
        });
      }
      throw err;
    }
  });
  return server;
}
