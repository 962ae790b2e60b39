// A drop-in for the TypeScript MCP SDK v2's `createRequestStateCodec`: the
// same `RequestStateCodec<T>` shape (`mint(payload, ctx)`, `verify(state,
// ctx)`, usable as `ServerOptions.requestState.verify`), with reqstate tokens
// that bind the tool, the step, the principal, the method and a digest of the
// arguments. No import of the SDK: the context is typed structurally.
import { callContext } from './callcontext.js';
import { Codec, type CodecOptions } from './codec.js';
import { ReqstateError } from './errors.js';

/** The part of the SDK's `ServerContext` this codec reads. */
export interface McpContextLike {
  mcpReq?: { method?: string; inputResponses?: Record<string, unknown> };
  http?: { authInfo?: { clientId?: string } };
}

/** The request a token is bound to: the tool (or prompt, resource) and its arguments. */
export interface McpCall {
  tool: string;
  /** The arguments' JSON text as received (preferred). */
  argumentsJson?: string;
  /** Or the parsed arguments. */
  arguments?: unknown;
}

export interface McpRequestStateCodecOptions<T> extends Omit<CodecOptions, 'keyring'> {
  /** A Keyring, keyring TOML, or the compact form (e.g. a Worker secret binding); or pass `codec`. */
  keyring?: CodecOptions['keyring'];
  codec?: Codec;
  /** Lifetime of a minted requestState, seconds (default 600). */
  ttlSeconds?: number;
  /** The request being served (a value, for a per-request server, or a function of the context). */
  call: McpCall | ((ctx: McpContextLike | undefined) => McpCall);
  /** The authenticated principal; default `ctx.http.authInfo.clientId`, else "anonymous". */
  principal?: (ctx: McpContextLike | undefined) => string;
  /** Who the server is (bound into the context); default "". */
  audience?: string;
  /**
   * The step a payload is for; default: its string `step` field, which is
   * then carried as the token's step claim rather than inside the state (a
   * payload without one gets the step "state").
   */
  step?: (payload: T) => string;
  /** The step an echoed requestState must be for; default: none (any step). See {@link stepFromInputResponses}. */
  expectedStep?: (ctx: McpContextLike) => string | undefined;
}

/** The SDK's `RequestStateCodec<T>` shape. */
export interface McpRequestStateCodec<T> {
  mint(payload: T, ctx?: McpContextLike): Promise<string>;
  verify(state: string, ctx: McpContextLike): Promise<T>;
}

/**
 * An `expectedStep` for flows whose step names are the keys of the input
 * requests they asked for (`amount` then `confirm` in the increase-counter example): the one key of
 * `inputResponses`, or none when there is not exactly one.
 */
export function stepFromInputResponses(ctx: McpContextLike): string | undefined {
  const keys = Object.keys(ctx.mcpReq?.inputResponses ?? {});
  return keys.length === 1 ? keys[0] : undefined;
}

/**
 * The tool and arguments of a JSON-RPC request body (`tools/call`,
 * `prompts/get`: `params.name` and `params.arguments`; `resources/read`:
 * `params.uri`). For a server that builds one instance per request (a Worker
 * under `createMcpHandler`): parse the body once, pass the result as `call`.
 */
export function mcpCallOf(message: unknown): McpCall | undefined {
  const m = message as { method?: unknown; params?: { name?: unknown; uri?: unknown; arguments?: unknown } } | null;
  if (!m || typeof m !== 'object' || !m.params || typeof m.params !== 'object') return undefined;
  if ((m.method === 'tools/call' || m.method === 'prompts/get') && typeof m.params.name === 'string') {
    return { tool: m.params.name, arguments: m.params.arguments ?? {} };
  }
  if (m.method === 'resources/read' && typeof m.params.uri === 'string') return { tool: m.params.uri, arguments: {} };
  return undefined;
}

const defaultPrincipal = (ctx: McpContextLike | undefined) => ctx?.http?.authInfo?.clientId ?? 'anonymous';

/**
 * `createRequestStateCodec` of `@modelcontextprotocol/server`, on reqstate
 * tokens. Every failure throws (a {@link ReqstateError}), which the SDK
 * answers with `-32602 Invalid or expired requestState`.
 */
export function createRequestStateCodec<T = unknown>(options: McpRequestStateCodecOptions<T>): McpRequestStateCodec<T> {
  const codec = options.codec ?? new Codec({ ...options, keyring: options.keyring ?? fail() });
  const ttl = options.ttlSeconds ?? 600;
  const principalOf = options.principal ?? defaultPrincipal;
  const audience = options.audience ?? '';
  const callOf = typeof options.call === 'function' ? options.call : () => options.call as McpCall;
  const binding = (ctx: McpContextLike | undefined) => {
    const call = callOf(ctx);
    if (!call || typeof call.tool !== 'string') throw new ReqstateError('invalid_argument', 'the codec was not told which tool is being called');
    const context = callContext({
      principal: principalOf(ctx),
      audience,
      method: ctx?.mcpReq?.method ?? 'tools/call',
      argumentsJson: call.argumentsJson,
      arguments: call.argumentsJson === undefined ? (call.arguments ?? {}) : undefined,
    });
    return { tool: call.tool, context };
  };
  return {
    async mint(payload: T, ctx?: McpContextLike): Promise<string> {
      const { tool, context } = binding(ctx);
      let step: string;
      let state: unknown = payload;
      if (options.step) step = options.step(payload);
      else if (isPlainObject(payload) && typeof payload.step === 'string') {
        // The step travels as the claim; the rest of the object is the state (a map).
        const { step: s, ...rest } = payload as unknown as { step: string };
        step = s;
        state = rest;
      } else {
        // No step field: the payload goes in a one-element array (never a map), so
        // verify can tell the two apart.
        step = 'state';
        state = [payload];
      }
      return codec.mint({ tool, step, state, ttl, context }).token;
    },
    async verify(state: string, ctx: McpContextLike): Promise<T> {
      const { tool, context } = binding(ctx);
      const v = codec.verify<unknown>(state, { tool, context, expectedStep: options.expectedStep?.(ctx) });
      if (options.step) return v.state as T;
      if (isPlainObject(v.state)) return { step: v.step, ...v.state } as T;
      if (Array.isArray(v.state) && v.state.length === 1) return v.state[0] as T;
      throw new ReqstateError('state_decoding', 'the state is not one this codec minted');
    },
  };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);
}

function fail(): never {
  throw new ReqstateError('invalid_keyring', 'createRequestStateCodec needs `keyring` or `codec`');
}
