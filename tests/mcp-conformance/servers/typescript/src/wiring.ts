// The requestState wiring of the conformance servers (@reqstate/codec's MCP codec, created once per
// process or isolate and bound to every server in one line), and the HTTP app shared by the Node
// and the Worker entries.
import { createMcpHandler } from '@modelcontextprotocol/server';
import { createRequestStateCodec } from '@reqstate/codec';
import { authInfoOf, createServer, type Carried } from './tools.js';

export interface Settings {
  /** Keyring text: TOML with inline secrets, or the compact form. */
  keys: string;
  ttlSeconds: number;
  /** Clock leeway, seconds; undefined: the policy's default. */
  clockLeewaySeconds?: number;
  /** Where refusals are logged, one line each. */
  log: (line: string) => void;
}

export const AUDIENCE = 'reqstate-conformance';

/** Settings from the contract's environment variables. */
export function settingsFromEnv(env: Record<string, string | undefined>, log: (line: string) => void): Settings {
  if (!env.REQSTATE_KEYS) throw new Error('REQSTATE_KEYS (keyring text) is required');
  const int = (name: string, v: string | undefined) => {
    if (v === undefined || v === '') return undefined;
    if (!/^\d+$/.test(v)) throw new Error(`${name} must be a whole number of seconds, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  return {
    keys: env.REQSTATE_KEYS,
    ttlSeconds: int('REQSTATE_TTL_SECONDS', env.REQSTATE_TTL_SECONDS) ?? 600,
    clockLeewaySeconds: int('REQSTATE_CLOCK_LEEWAY_SECONDS', env.REQSTATE_CLOCK_LEEWAY_SECONDS),
    log,
  };
}

/** A fetch handler serving the conformance server at /mcp (protocol 2026-07-28, stateless). */
export function createApp(settings: Settings): (request: Request) => Promise<Response> {
  const requestState = createRequestStateCodec<Carried>({
    keyring: settings.keys,
    audience: AUDIENCE,
    ttlSeconds: settings.ttlSeconds,
    clockLeewaySeconds: settings.clockLeewaySeconds,
    // The contract's log line, `reqstate refused <method> <tool>: <reason>: <message>`, is the
    // drop-in's own (its `log`, console.error by default).
    log: settings.log,
  });
  const handler = createMcpHandler(() => requestState.bind(createServer(requestState)), { legacy: 'reject' });
  return async (request: Request) => {
    if (new URL(request.url).pathname !== '/mcp') return new Response('Not found', { status: 404 });
    return handler.fetch(request, { authInfo: authInfoOf(request) });
  };
}
