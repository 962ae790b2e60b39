// A drop-in for the TypeScript MCP SDK v2's `createRequestStateCodec`: the
// same `RequestStateCodec<T>` shape (`mint(payload, ctx)`, `verify(state,
// ctx)`, usable as `ServerOptions.requestState.verify`), with reqstate tokens
// that bind the tool, the step, the principal, the method and a digest of the
// arguments. `bind(server)` installs it on an `McpServer` or a low-level
// `Server` and lets it see each request's tool and arguments;
// `inputRequired(ctx, ...)` mints a round whose step is the keys it asks for,
// and a retry that leaves some of them unanswered is asked again
// (`unanswered(ctx)`), as SEP-2322 says. No import of the SDK: the server
// and the context are typed structurally, and the SDK internals `bind` relies
// on are checked when it is called.
import { primitives } from './primitives.js';
import { base64urlEncode, isWellFormed, utf8 } from './bytes.js';
import { MAX_STATE_DEPTH } from './cbor.js';
import { callContext } from './callcontext.js';
import { Codec, Policy, type CodecOptions, type PolicyOptions } from './codec.js';
import { ReqstateError, type Reason } from './errors.js';

/** SHA-256 on this runtime's primitives (node:crypto or pure). */
const sha256 = (data: Uint8Array): Uint8Array => primitives.sha256(data);

/** The part of the SDK's `ServerContext` this codec reads. */
export interface McpContextLike {
  mcpReq?: {
    /** The JSON-RPC id of the request being served. */
    id?: string | number;
    method?: string;
    /** One per inbound request (the SDK's `AbortSignal`): how the codec finds the call it recorded. */
    signal?: object;
    inputResponses?: Record<string, unknown>;
    /** Keys whose answers the SDK dropped as malformed: unanswered. */
    droppedInputResponseKeys?: string[];
  };
  /** The SDK's `ctx.http`: `authInfo` is what the server's token verifier returned (absent: no authentication). */
  http?: { authInfo?: McpAuthInfoLike };
}

/**
 * The part of the SDK's `AuthInfo` the default principal reads. The SDK has
 * no issuer or subject fields, so they are read from `extra` under the JWT
 * claim names `iss` and `sub`, which the server's token verifier puts there.
 */
export interface McpAuthInfoLike {
  /** The OAuth client the access token was issued to. */
  clientId?: string;
  extra?: Record<string, unknown>;
}

/** The request a token is bound to: the tool (or prompt, resource) and its arguments. */
export interface McpCall {
  tool: string;
  /** The arguments' JSON text as received (preferred). */
  argumentsJson?: string;
  /** Or the parsed arguments. */
  arguments?: unknown;
}

/** What {@link McpRequestStateCodecOptions.onRefusal} is told about a refused requestState. */
export interface McpRefusal {
  /** The reason's name (docs/CLI.md "Reasons"), e.g. `authentication_failed`. */
  reason: Reason;
  /** The operator's message: starts with the reason; never the state, the arguments or the principal. */
  message: string;
  /** `tools/call`, `prompts/get` or `resources/read`. */
  method: string;
  /**
   * The tool or prompt name, or the resource URI, exactly as the client sent
   * it ("" when the codec did not see the call): raw, so quote it (as
   * {@link logName} does) before writing it into a log line.
   */
  tool: string;
}

export interface McpRequestStateCodecOptions<T> extends Omit<CodecOptions, 'keyring'> {
  /** A Keyring, keyring TOML, or the compact form (e.g. a Worker secret binding); or pass `codec`. */
  keyring?: CodecOptions['keyring'];
  codec?: Codec;
  /**
   * Lifetime of a minted requestState, seconds (default 600). Over the
   * policy's max lifetime (default 86400): `lifetime_too_long` when the codec
   * is created. A token is accepted until ttl + the clock leeway.
   */
  ttlSeconds?: number;
  /**
   * Clock leeway, seconds (0..=600; default the policy's, 60): a token is
   * accepted until ttl + leeway after it was minted, and one minted by a clock
   * up to this far ahead is accepted. The SDK's own codec has none.
   */
  clockLeewaySeconds?: number;
  /**
   * The request being served, for servers that do not use {@link
   * McpRequestStateCodec.bind} (a value, for a per-request server, or a
   * function of the context). With `bind`, the codec reads the call itself.
   */
  call?: McpCall | ((ctx: McpContextLike | undefined) => McpCall | undefined);
  /**
   * The caller a round is bound to (docs/MCP.md, "The caller a round is bound
   * to"). Default: `[clientId, iss, sub]` of `ctx.http.authInfo` (`iss` and
   * `sub` from `authInfo.extra`), `null` without authentication; an
   * authenticated call whose token names no subject is refused. A function
   * given here chooses instead: its string is bound as a JSON string, so it
   * never equals a default principal; `null` or `undefined` means no
   * authenticated caller.
   */
  principal?: (ctx: McpContextLike | undefined) => string | null | undefined;
  /**
   * Who the server is (bound into the context), so that services sharing a
   * keyring refuse each other's rounds. Default: the name of the server
   * `bind` is given (its implementation info, as the Python drop-in defaults
   * to the server's name); `bind` throws when that server has none. A codec
   * used without `bind` (the `call` option) must be given one.
   */
  audience?: string;
  /**
   * For `mint(payload)`: the step a payload is for; default: its string
   * `step` field, which is then carried as the token's step claim rather than
   * inside the state (a payload without one gets the step "state").
   * {@link McpRequestStateCodec.inputRequired} rounds do not use it.
   */
  step?: (payload: T) => string;
  /**
   * For tokens minted by `mint(payload)`: the step an echoed requestState
   * must be for; default none. Rounds minted by `inputRequired` carry the
   * keys they asked for and need none.
   */
  expectedStep?: (ctx: McpContextLike) => string | undefined;
  /**
   * A retry of an `inputRequired` round that leaves some asked key
   * unanswered: `'ask-again'` (default) hands the handler the state and
   * lists the keys in `unanswered(ctx)`; `'refuse'` refuses it (`wrong_step`).
   */
  incomplete?: 'ask-again' | 'refuse';
  /**
   * Called with every refusal of `verify`, before it throws (which the SDK
   * answers with its fixed `-32602 Invalid or expired requestState`, and
   * reports to `server.onerror`). What it throws is ignored.
   */
  onRefusal?: (refusal: McpRefusal) => void;
  /**
   * Where the operator's lines go: each refusal as `reqstate refused <method>
   * <tool>: <reason>: <message>` (docs/MCP.md, the Python drop-in's line),
   * a round the connection cannot carry, and a server wired so that clients
   * of protocol 2026-07-28 cannot reach it. Default: `console.error`
   * (standard error, which a stdio server keeps free of the protocol; a
   * Worker's logs). `false` turns them off. What it throws is ignored.
   */
  log?: ((line: string) => void) | false;
}

/**
 * The SDK's `InputRequiredResult` as {@link McpRequestStateCodec.inputRequired}
 * builds it (a type, not an interface, so that it is assignable to the SDK's
 * handler result types, which have an index signature).
 */
export type McpInputRequiredResult<R> = {
  resultType: 'input_required';
  inputRequests: R;
  requestState: string;
};

/** The SDK's `RequestStateCodec<T>` shape, with the binding to a server and asking again. */
export interface McpRequestStateCodec<T> {
  /**
   * Installs the codec on an `McpServer` or a low-level `Server` (before it
   * is connected) and returns it: its `requestState.verify` hook, and what
   * lets the codec read each call's tool and arguments. Throws if the server
   * has another verify hook, is already connected, or is not an SDK 2.x
   * server as this package knows it.
   */
  bind<S extends object>(server: S): S;
  /**
   * The recommended way to ask: mints the round's requestState, bound to the
   * call of `ctx`, whose step is the asked keys
   * ({@link stepOfInputRequests}), and returns the `InputRequiredResult`.
   */
  inputRequired<R extends Record<string, unknown>>(ctx: McpContextLike, round: { inputRequests: R; state: T }): Promise<McpInputRequiredResult<R>>;
  /**
   * The keys the verified round of `ctx` asked for and the retry did not
   * answer (missing, or dropped by the SDK as malformed); empty when the
   * answers are complete or the request carried no `inputRequired` round;
   * `null` when the round is incomplete under a `sha256:` step (asked keys
   * over 256 bytes as JSON), whose keys cannot be named: ask again for the
   * keys your state says you asked. Ask again whenever it is not `[]`.
   */
  unanswered(ctx: McpContextLike): string[] | null;
  /** Mints a requestState for `payload`, bound to the call of `ctx` (required: throws without it). */
  mint(payload: T, ctx?: McpContextLike): Promise<string>;
  /** The SDK's verify hook: the state, or a throw (a {@link ReqstateError} whose message starts with its reason). */
  verify(state: string, ctx: McpContextLike): Promise<T>;
}

/** Longest step the format allows, bytes (FORMAT.md). */
const MAX_STEP_BYTES = 256;

/**
 * The step of a round that asks for `keys` (docs/MCP.md, "The step of a
 * round"; the same in the Python package): the keys, deduplicated, sorted by
 * their UTF-8 bytes, as a compact JSON array (`["a","b"]`); if that text is
 * over 256 UTF-8 bytes, `"sha256:"` + the unpadded base64url of its SHA-256.
 * A key with a lone surrogate is `invalid_argument`.
 */
export function stepOfInputRequests(keys: Iterable<string>): string {
  return roundStep(sortedKeys(keys)).step;
}

function sortedKeys(keys: Iterable<string>): string[] {
  const seen = new Map<string, Uint8Array>();
  for (const k of keys) {
    if (typeof k !== 'string' || !isWellFormed(k)) throw new ReqstateError('invalid_argument', 'an input request key must be a string of UTF-8 text (no lone surrogate)');
    if (!seen.has(k)) seen.set(k, utf8(k));
  }
  return [...seen].sort((a, b) => compareBytes(a[1], b[1])).map(([k]) => k);
}

function roundStep(sorted: string[]): { step: string; hashed: boolean } {
  const text = `[${sorted.map((k) => JSON.stringify(k)).join(',')}]`;
  const bytes = utf8(text);
  if (bytes.length <= MAX_STEP_BYTES) return { step: text, hashed: false };
  return { step: `sha256:${base64urlEncode(sha256(bytes))}`, hashed: true };
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * An `expectedStep` for `mint(payload)` flows whose step names are the keys of the input
 * requests they asked for: the one key of `inputResponses`, or none when
 * there is not exactly one. Prefer {@link McpRequestStateCodec.inputRequired},
 * which binds the asked keys in every round and asks again when some are unanswered.
 */
export function stepFromInputResponses(ctx: McpContextLike): string | undefined {
  const keys = Object.keys(ctx.mcpReq?.inputResponses ?? {});
  return keys.length === 1 ? keys[0] : undefined;
}

/**
 * The tool and arguments of a JSON-RPC request body (`tools/call`,
 * `prompts/get`: `params.name` and `params.arguments`; `resources/read`:
 * `params.uri`). `bind` reads them itself; this is for servers that pass `call`.
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

/**
 * Compact JSON of strings, `null` and arrays of them, exactly Python's
 * `json.dumps(value, separators=(",", ":"))`: both drop-ins must give one
 * caller the same principal bytes, so every UTF-16 unit from U+007F up is
 * written as `\u` + 4 lowercase hex digits (ensure_ascii), which
 * `JSON.stringify` leaves as itself.
 */
function pythonCompactJson(value: string | null | readonly (string | null)[]): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** What to do when the default principal cannot bind this call's caller. */
const CHOOSE_PRINCIPAL =
  'or pass `principal: (ctx) => ...` to createRequestStateCodec to choose what to bind (e.g. `(ctx) => ctx?.http?.authInfo?.clientId`, knowingly making every user of one client one caller)';

/**
 * The default principal (docs/MCP.md, "The caller a round is bound to"; the
 * same bytes as the Python drop-in, tests/vectors/mcp_principals.json):
 * `null` without authentication, else `[clientId, issuer, subject]`. A
 * client id names an application, not a user, so a token naming no subject
 * is refused rather than bound to the client alone. Exported for servers
 * that wire the SDK themselves (a sidecar client's handlers), so that they
 * bind the caller exactly as the drop-ins do.
 */
export function mcpPrincipal(ctx: McpContextLike | undefined): string {
  const auth = ctx?.http?.authInfo;
  if (auth === undefined || auth === null) return 'null';
  if (typeof auth !== 'object') throw new ReqstateError('invalid_argument', 'ctx.http.authInfo is not an object (the SDK\'s AuthInfo from the token verifier)');
  const clientId = auth.clientId;
  if (typeof clientId !== 'string') {
    throw new ReqstateError('invalid_argument', `ctx.http.authInfo.clientId is ${kindOf(clientId)}, not a string: have the token verifier return the SDK's AuthInfo, ${CHOOSE_PRINCIPAL}`);
  }
  const extra = auth.extra;
  const claim = (name: 'iss' | 'sub'): string | null => {
    const v = extra !== null && typeof extra === 'object' ? extra[name] : undefined;
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') {
      throw new ReqstateError('invalid_argument', `ctx.http.authInfo.extra.${name} is ${kindOf(v)}, not a string: have the token verifier put the token's \`${name}\` claim there as it is, ${CHOOSE_PRINCIPAL}`);
    }
    return v;
  };
  const issuer = claim('iss');
  const subject = claim('sub');
  if (subject === null) {
    throw new ReqstateError(
      'invalid_argument',
      'the access token of this call names no subject (ctx.http.authInfo.extra.sub), so the round would be bound to the OAuth client, which every user of that client shares: ' +
        `have the token verifier put the token's \`sub\` (and \`iss\`) claims in authInfo.extra, ${CHOOSE_PRINCIPAL}`,
    );
  }
  return pythonCompactJson([clientId, issuer, subject]);
}

/** A custom principal function's answer as the principal: a JSON string, or `null` for no authenticated caller. */
function customPrincipal(returned: unknown): string {
  if (returned === undefined || returned === null) return 'null';
  if (typeof returned !== 'string') throw new ReqstateError('invalid_argument', `the principal function returned ${kindOf(returned)}: return a string, or null for no authenticated caller`);
  return pythonCompactJson(returned);
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'absent';
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

/** Longest part of a client-supplied name a refusal quotes, in code points (tests/vectors/mcp_log_names.json). */
const MAX_QUOTED_NAME = 64;

/**
 * A client-supplied name (a tool, a prompt, a resource URI) as a refusal's
 * message writes it (docs/MCP.md, "Refusals"; tests/vectors/mcp_log_names.json,
 * the same in the Python drop-in): its first 64 code points in double
 * quotes, `"` and `\` escaped with a backslash, printable ASCII as itself,
 * everything else as `\u` + 4 lowercase hex digits per UTF-16 unit; a longer
 * name is followed by `...(N characters)`. The result is printable ASCII, so
 * a name can neither break a log line nor reach a terminal as an escape.
 */
export function logName(name: string): string {
  let out = '"';
  let length = 0;
  for (const c of name) {
    length++;
    if (length > MAX_QUOTED_NAME) continue;
    if (c === '"' || c === '\\') out += `\\${c}`;
    else if (c.length === 1 && c >= ' ' && c <= '~') out += c;
    else for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
  }
  out += '"';
  return length > MAX_QUOTED_NAME ? `${out}...(${length} characters)` : out;
}

/**
 * Text that reaches a refusal's message from elsewhere (a reason's detail,
 * which may name a path through the client's arguments): printable ASCII
 * only and bounded, for the same reason as {@link logName}.
 */
const MAX_DETAIL = 1024;
function printable(text: string): string {
  const escaped = text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return escaped.length > MAX_DETAIL ? `${escaped.slice(0, MAX_DETAIL)}...(cut)` : escaped;
}

/** A call the codec recorded from the wire. */
interface SeenCall extends McpCall {
  method: string;
  /** The audience of the bound server that received it. */
  audience?: string;
  /** The bound server that is serving it (for the era it is served on). */
  server?: LowLevelServer;
}

/** What the verify of a round left for `unanswered(ctx)`. */
interface RoundSeen {
  responses: unknown;
  unanswered: string[] | null;
}

const SUPPORTED_SDK = '@modelcontextprotocol/server 2.x (tested with 2.4.0)';
const BOUND = Symbol.for('@reqstate/codec.bound');
const INSTRUMENTED = Symbol.for('@reqstate/codec.transport');

type AnyFn = (this: unknown, ...args: unknown[]) => unknown;
interface LowLevelServer {
  connect: AnyFn;
  buildContext: AnyFn;
  transport?: unknown;
  _requestStateVerify?: unknown;
  _verifyRequestState?: unknown;
  /** The implementation info the server was created with (`new Server({ name, version }, …)`). */
  _serverInfo?: unknown;
  /** Whether this instance serves protocol 2026-07-28 or later (SDK 2.4: set by serveStdio, createMcpHandler, server/discover). */
  _servedModernEra?: unknown;
  /** The capabilities a 2025-era client declared in `initialize` (absent on per-request legacy serving). */
  _clientCapabilities?: unknown;
  [BOUND]?: unknown;
}

/** The name a bound server is known by: its implementation info's `name`, the default audience. */
function serverNameOf(low: LowLevelServer): string | undefined {
  const info = low._serverInfo as { name?: unknown } | null | undefined;
  const name = info !== null && typeof info === 'object' ? info.name : undefined;
  return typeof name === 'string' && name !== '' && isWellFormed(name) ? name : undefined;
}

/** The low-level `Server` of an `McpServer` (its `.server`) or of a `Server`; a clear error for anything else. */
function lowLevelOf(server: unknown): LowLevelServer {
  const s = server as { server?: unknown } | null;
  if (s === null || typeof s !== 'object') throw new TypeError(`bind: not an MCP server (expected an McpServer or a Server of ${SUPPORTED_SDK})`);
  const candidate = (isLowLevel(s) ? s : s.server) as unknown;
  if (!isLowLevel(candidate)) {
    throw new TypeError(
      `bind: this server is not one @reqstate/codec can bind (expected an McpServer or a Server of ${SUPPORTED_SDK}: ` +
        'connect, buildContext, the requestState verify hook)',
    );
  }
  return candidate;
}

function isLowLevel(v: unknown): v is LowLevelServer {
  if (v === null || typeof v !== 'object') return false;
  const s = v as Record<string, unknown>;
  return typeof s.connect === 'function' && typeof s.buildContext === 'function' && typeof s._verifyRequestState === 'function' && '_requestStateVerify' in s;
}

/** The call a JSON-RPC request is about, for the three methods that take a requestState. */
function seenCallOf(message: unknown): { id: unknown; call: SeenCall } | undefined {
  const m = message as { id?: unknown; method?: unknown } | null;
  if (!m || typeof m !== 'object' || m.id === undefined || m.id === null || typeof m.method !== 'string') return undefined;
  const call = mcpCallOf(m);
  return call ? { id: m.id, call: { ...call, method: m.method } } : undefined;
}

/**
 * Lets the codec see every request a transport delivers to `pending`'s
 * server: the SDK assigns `transport.onmessage` when it connects; the
 * function it assigns is wrapped so that the request's call is in `pending`
 * (by JSON-RPC id) while the SDK dispatches it, which synchronously builds
 * the handler's context (where the call is tied to the request's signal).
 */
function instrument(transport: unknown, pending: Map<unknown, SeenCall>): () => boolean {
  if (transport === null || typeof transport !== 'object') throw new TypeError('bind: the transport is not an object');
  const t = transport as Record<PropertyKey, unknown>;
  const previous = t[INSTRUMENTED] as { raw: () => unknown } | undefined;
  if (previous) {
    // Connected again (to this or another bound server): start from the plain handler.
    const plain = previous.raw();
    delete t.onmessage;
    t.onmessage = plain;
  }
  // What the transport had before (a caller's own hook) stays as it is; what
  // is assigned from now on (the SDK's dispatcher) is wrapped.
  let raw = t.onmessage;
  let current = raw;
  let assigned = false;
  const recorderOf = (dispatch: AnyFn) =>
    function (this: unknown, message: unknown, extra: unknown) {
      const seen = seenCallOf(message);
      // Nested (a dispatcher calling the hook it replaced): the outer call records.
      if (seen === undefined || pending.has(seen.id)) return dispatch.call(this, message, extra);
      pending.set(seen.id, seen.call);
      try {
        return dispatch.call(this, message, extra);
      } finally {
        pending.delete(seen.id);
      }
    };
  Object.defineProperty(t, 'onmessage', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (f: unknown) => {
      raw = f;
      current = typeof f === 'function' ? recorderOf(f as AnyFn) : f;
      assigned = true;
    },
  });
  Object.defineProperty(t, INSTRUMENTED, { configurable: true, enumerable: false, value: { raw: () => raw } });
  return () => assigned;
}

/**
 * `createRequestStateCodec` of `@modelcontextprotocol/server`, on reqstate
 * tokens: create it once per process (per isolate on Workers) and
 * `bind(server)` each server to it. Every refusal of `verify` throws a
 * {@link ReqstateError} whose message starts with its reason (after calling
 * `onRefusal`); the SDK answers the client `-32602 Invalid or expired
 * requestState` and hands the message to `server.onerror`.
 */
export function createRequestStateCodec<T = unknown>(options: McpRequestStateCodecOptions<T>): McpRequestStateCodec<T> {
  const codec = options.codec ?? new Codec({ ...options, keyring: options.keyring ?? fail(), policy: policyWithLeeway(options) });
  if (options.codec && options.clockLeewaySeconds !== undefined && options.clockLeewaySeconds !== options.codec.policy.clockLeeway) {
    throw new ReqstateError('invalid_argument', `clockLeewaySeconds ${options.clockLeewaySeconds} differs from the given codec's policy (clock leeway ${options.codec.policy.clockLeeway} s)`);
  }
  const ttl = options.ttlSeconds ?? 600;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1) throw new ReqstateError('invalid_argument', 'ttlSeconds must be a whole number of seconds, at least 1');
  if (ttl > codec.policy.maxLifetime) {
    throw new ReqstateError('lifetime_too_long', `ttlSeconds ${ttl} is over the policy's max lifetime of ${codec.policy.maxLifetime} s (raise policy.maxLifetime, up to 2592000, or lower ttlSeconds)`);
  }
  const incomplete = options.incomplete ?? 'ask-again';
  if (incomplete !== 'ask-again' && incomplete !== 'refuse') throw new ReqstateError('invalid_argument', "incomplete must be 'ask-again' or 'refuse'");
  const custom = options.principal;
  const principalOf = custom === undefined ? mcpPrincipal : (ctx: McpContextLike | undefined) => customPrincipal(custom(ctx));
  if (options.audience !== undefined && (typeof options.audience !== 'string' || !isWellFormed(options.audience))) {
    throw new ReqstateError('invalid_argument', 'audience must be a string of UTF-8 text (the name of this service)');
  }
  if (options.call !== undefined && options.audience === undefined) {
    // No bound server to name it: the empty audience would be every such service's.
    throw new ReqstateError(
      'invalid_argument',
      'createRequestStateCodec with `call` needs `audience` (the name of this service): without a bound server to name it, ' +
        "rounds would be bound to the empty audience, so services sharing a keyring would accept each other's rounds",
    );
  }
  const unboundAudience = options.audience ?? '';
  const leeway = codec.policy.clockLeeway;
  if (options.log !== undefined && options.log !== false && typeof options.log !== 'function') {
    throw new ReqstateError('invalid_argument', 'log must be a function of one line, or false');
  }
  const log = options.log === undefined ? standardError : options.log;
  /** One operator's line, through `log`; its failure changes nothing. */
  const say = (line: string): void => {
    if (log === false) return;
    try {
      log(line);
    } catch {
      // The log's own failure does not change the answer.
    }
  };

  // The call of each request a bound server is serving, by the request's signal.
  const calls = new WeakMap<object, SeenCall>();
  // The asked keys of the round each request's verify accepted.
  const rounds = new WeakMap<object, RoundSeen>();

  const signalOf = (ctx: McpContextLike | undefined): object | undefined => {
    const s = ctx?.mcpReq?.signal;
    return s !== null && typeof s === 'object' ? s : undefined;
  };

  const callFor = (ctx: McpContextLike | undefined, what: string): SeenCall => {
    if (ctx === null || typeof ctx !== 'object') {
      throw new ReqstateError('invalid_argument', `${what} needs the handler's ctx (the token is bound to the call it serves): pass it as the SDK gives it`);
    }
    const signal = signalOf(ctx);
    const seen = signal && calls.get(signal);
    if (seen) return seen;
    const given = typeof options.call === 'function' ? options.call(ctx) : options.call;
    if (given && typeof given.tool === 'string') return { ...given, method: ctx.mcpReq?.method ?? 'tools/call' };
    throw new ReqstateError(
      'invalid_argument',
      `${what}: the codec did not see this request${ctx.mcpReq?.method ? ` (${ctx.mcpReq.method})` : ''}: bind(server) before connecting it, and pass the handler's ctx`,
    );
  };

  const bindingOf = (call: SeenCall, ctx: McpContextLike) => {
    const context = callContext({
      principal: principalOf(ctx),
      audience: call.audience ?? unboundAudience,
      method: call.method,
      argumentsJson: call.argumentsJson,
      arguments: call.argumentsJson === undefined ? (call.arguments ?? {}) : undefined,
    });
    return { tool: call.tool, context };
  };

  const refusal = (e: unknown, call: SeenCall | undefined, ctx: McpContextLike | undefined): unknown => {
    if (!(e instanceof ReqstateError)) return e;
    const method = call?.method ?? ctx?.mcpReq?.method ?? '';
    const tool = call?.tool ?? '';
    const err = new ReqstateError(e.reason, e.detail, { cause: e });
    err.message = `${e.reason}: ${explain(e, method, tool, leeway)}`;
    say(`reqstate refused ${method || 'a request'} ${logName(tool)}: ${err.message}`);
    if (options.onRefusal) {
      try {
        options.onRefusal({ reason: err.reason, message: err.message, method, tool });
      } catch {
        // The hook's own failure does not change the answer.
      }
    }
    return err;
  };

  const verify = async (state: string, ctx: McpContextLike): Promise<T> => {
    let call: SeenCall | undefined;
    const signal = signalOf(ctx);
    if (signal) rounds.delete(signal);
    try {
      call = callFor(ctx, 'verify');
      const { tool, context } = bindingOf(call, ctx);
      const v = codec.verify<unknown>(state, { tool, context });
      const round = askedOf(v.step);
      if (round === undefined) {
        // A token of mint(payload).
        const expected = options.expectedStep?.(ctx);
        if (expected !== undefined && v.step !== expected) throw new ReqstateError('wrong_step', 'the token is for another step');
        if (options.step) return v.state as T;
        if (isPlainObject(v.state)) return { step: v.step, ...v.state } as T;
        if (Array.isArray(v.state) && v.state.length === 1) return v.state[0] as T;
        throw new ReqstateError('state_decoding', 'the state is not one this codec minted');
      }
      const seen = roundOf(v.step, round.asked, ctx.mcpReq?.inputResponses);
      if (seen.unanswered?.length !== 0 && incomplete === 'refuse') {
        throw new ReqstateError('wrong_step', 'the token asked for other input than this request answers');
      }
      if (signal) rounds.set(signal, seen);
      return v.state as T;
    } catch (e) {
      throw refusal(e, call, ctx);
    }
  };

  const api: McpRequestStateCodec<T> = {
    bind<S extends object>(server: S): S {
      const low = lowLevelOf(server);
      if (low[BOUND] === api) return server;
      if (low[BOUND] !== undefined) throw new Error('bind: this server is already bound to another @reqstate/codec codec');
      const hook = low._requestStateVerify;
      if (hook !== undefined && hook !== verify && hook !== api.verify) {
        throw new Error('bind: this server already has a requestState.verify hook of its own; refusing to replace someone else\'s verifier');
      }
      if (low.transport !== undefined) throw new Error('bind: the server is already connected; bind it before connect()');
      const audience = options.audience ?? serverNameOf(low);
      if (audience === undefined) {
        throw new Error(
          'bind: the server has no name to bind its rounds to (its implementation info, `new McpServer({ name, version }, …)`, names none); ' +
            'pass `audience` (the name of this service) to createRequestStateCodec, so that services sharing a keyring refuse each other\'s rounds',
        );
      }
      const pending = new Map<unknown, SeenCall>();
      const buildContext = low.buildContext;
      const connect = low.connect;
      low._requestStateVerify = verify;
      low.buildContext = function (this: unknown, ...args: unknown[]) {
        const ctx = buildContext.apply(this, args) as McpContextLike;
        const req = ctx?.mcpReq;
        const seen = req === undefined ? undefined : pending.get(req.id);
        const signal = signalOf(ctx);
        if (seen && signal && seen.method === req?.method) calls.set(signal, { ...seen, audience, server: low });
        return ctx;
      };
      low.connect = async function (this: unknown, ...args: unknown[]) {
        if (isHandWiredStdio(args[0])) {
          say(
            `reqstate: server ${logName(audience)} is connected to a StdioServerTransport by hand, which serves only 2025-era clients (initialize): ` +
              'their input rounds run through the SDK as elicitation/create requests the client must handle, and a client of protocol 2026-07-28 cannot connect. ' +
              "Serve it with serveStdio(createServer) from '@modelcontextprotocol/server/stdio', which serves both (docs/MCP.md, \"Wiring and clients\")",
          );
        }
        const wasAssigned = instrument(args[0], pending);
        const r = await connect.apply(this, args);
        if (!wasAssigned()) {
          throw new Error(`bind: the SDK did not attach to transport.onmessage when connecting; @reqstate/codec supports ${SUPPORTED_SDK}`);
        }
        return r;
      };
      Object.defineProperty(low, BOUND, { configurable: true, enumerable: false, value: api });
      return server;
    },

    async inputRequired<R extends Record<string, unknown>>(ctx: McpContextLike, round: { inputRequests: R; state: T }): Promise<McpInputRequiredResult<R>> {
      if (round === null || typeof round !== 'object') throw new ReqstateError('invalid_argument', 'inputRequired(ctx, { inputRequests, state })');
      const inputRequests = round.inputRequests ?? ({} as R);
      if (inputRequests === null || typeof inputRequests !== 'object') throw new ReqstateError('invalid_argument', 'inputRequests must be an object');
      const call = callFor(ctx, 'inputRequired');
      if (Object.keys(inputRequests).length > 0 && cannotAsk(call.server)) {
        say(`reqstate could not ask for input in ${call.method} ${logName(call.tool)}: ${CANNOT_ASK}`);
        throw new Error(`This call needs input from the client (an input_required round), and ${CANNOT_ASK}`);
      }
      const { tool, context } = bindingOf(call, ctx);
      const { step } = roundStep(sortedKeys(Object.keys(inputRequests)));
      checkState(round.state, 0);
      // The token carries the handler's state and nothing else (docs/MCP.md): the asked keys are its step.
      const token = codec.mint({ tool, step, state: round.state, ttl, context }).token;
      return { resultType: 'input_required', inputRequests, requestState: token };
    },

    unanswered(ctx: McpContextLike): string[] | null {
      const signal = signalOf(ctx);
      if (signal === undefined) throw new ReqstateError('invalid_argument', "unanswered needs the handler's ctx");
      const seen = rounds.get(signal);
      if (seen === undefined || seen.responses !== ctx.mcpReq?.inputResponses) return [];
      return seen.unanswered === null ? null : [...seen.unanswered];
    },

    async mint(payload: T, ctx?: McpContextLike): Promise<string> {
      const call = callFor(ctx, 'mint');
      const { tool, context } = bindingOf(call, ctx!);
      let step: string;
      let state: unknown = payload;
      if (options.step) {
        step = options.step(payload);
        checkState(state, 0);
      } else if (isPlainObject(payload) && typeof payload.step === 'string') {
        // The step travels as the claim; the rest of the object is the state (a map).
        const { step: s, ...rest } = payload as unknown as { step: string };
        step = s;
        state = rest;
        checkState(state, 0);
      } else {
        // No step field: the payload goes in a one-element array (never a map), so
        // verify can tell the two apart.
        step = 'state';
        checkState(payload, 1);
        state = [payload];
      }
      return codec.mint({ tool, step, state, ttl, context }).token;
    },

    verify,
  };
  return api;
}

/** The default `log`: `console.error` (standard error on Node, Deno and Bun; a Worker's logs), where there is one. */
function standardError(line: string): void {
  (globalThis as { console?: { error?: (line: string) => void } }).console?.error?.(line);
}

/**
 * Why a connection cannot carry an input round, and what the client must do
 * (docs/MCP.md, "Wiring and clients").
 */
const CANNOT_ASK =
  'this client connected with a 2025-era protocol (initialize) to a server that serves each HTTP request alone (stateless), which cannot send it requests: ' +
  "the client must connect with MCP protocol 2026-07-28 (the TypeScript SDK's Client: versionNegotiation: { mode: 'auto' } or { mode: { pin: '2026-07-28' } }, " +
  'and capabilities: { elicitation: { form: {} } })';

/**
 * A server serving this request on the 2025-era protocol with no client
 * capabilities (a per-request legacy instance, as `createMcpHandler` makes
 * for an `initialize`-era client): the SDK's legacy path would have to send
 * the client an elicitation request, and there is no connection to send it on.
 */
function cannotAsk(server: LowLevelServer | undefined): boolean {
  if (server === undefined || typeof server._servedModernEra !== 'function') return false;
  return !(server._servedModernEra as () => boolean).call(server) && server._clientCapabilities === undefined;
}

/** The SDK's StdioServerTransport connected by hand (`server.connect(new StdioServerTransport())`): 2025-era only. */
function isHandWiredStdio(transport: unknown): boolean {
  if (transport === null || typeof transport !== 'object') return false;
  const ctor = (transport as { constructor?: { name?: unknown } }).constructor;
  return ctor?.name === 'StdioServerTransport';
}

/**
 * The asked keys of a round minted by `inputRequired` (docs/MCP.md): its step
 * is the compact JSON array of the keys, or `sha256:` of it (`null`: keys
 * that cannot be read back). `undefined`: not a round (a `mint(payload)` token).
 */
function askedOf(step: string): { asked: string[] | null } | undefined {
  if (step.startsWith('sha256:')) return { asked: null };
  if (!step.startsWith('[')) return undefined;
  let keys: unknown;
  try {
    keys = JSON.parse(step);
  } catch {
    return undefined;
  }
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'string' && isWellFormed(k))) return undefined;
  return roundStep(sortedKeys(keys as string[])).step === step ? { asked: keys as string[] } : undefined;
}

/** What a retry answers of a round: `unanswered` null when the keys cannot be named (a `sha256:` step). */
function roundOf(step: string, asked: string[] | null, responses: unknown): RoundSeen {
  const r = responses !== null && typeof responses === 'object' ? (responses as Record<string, unknown>) : {};
  if (asked === null) {
    const answered = Object.keys(r).filter((k) => r[k] !== undefined && isWellFormed(k));
    const complete = roundStep(sortedKeys(answered)).step === step;
    return { responses, unanswered: complete ? [] : null };
  }
  return { responses, unanswered: missingKeys(asked, r) };
}

function missingKeys(asked: string[], r: Record<string, unknown>): string[] {
  return asked.filter((k) => !Object.prototype.hasOwnProperty.call(r, k) || r[k] === undefined);
}

/** The operator's text for a refusal (after its reason's name). */
function explain(e: ReqstateError, method: string, tool: string, leeway: number): string {
  const what = tool ? `${method} ${logName(tool)}` : method || 'this request';
  switch (e.reason) {
    case 'authentication_failed':
      return `the token does not verify for ${what} as called (its tool, arguments, method, principal or audience differ from the minting call, or it was altered)`;
    case 'expired':
      return `the token for ${what} has expired (a token is accepted for its ttl + the clock leeway of ${leeway} s)`;
    case 'not_yet_valid':
      return `the token for ${what} was issued more than the clock leeway of ${leeway} s in the future (a minting clock ahead of this one)`;
    case 'wrong_step':
      return e.detail === 'the token asked for other input than this request answers'
        ? `the token for ${what} asked for other input than this request answers`
        : `the token for ${what} is for another step`;
    case 'unknown_key':
      return `the token's key is not in this keyring (${printable(e.detail ?? 'unknown')}): minted under another keyring, or a key removed too early`;
    default:
      return printable(e.detail ?? e.message);
  }
}

/**
 * What the SDK's codec accepts and the format does not, refused at mint with
 * the path: a `Date` (the SDK's JSON turns it into its ISO text), nesting
 * beyond the format's limit (`wrapped` levels are the codec's own).
 */
function checkState(value: unknown, wrapped: number): void {
  const limit = MAX_STATE_DEPTH - wrapped;
  const seen = new Set<unknown>();
  const go = (v: unknown, path: string, depth: number): void => {
    if (v === null || typeof v !== 'object' || v instanceof Uint8Array) return;
    if (v instanceof Date) {
      throw new ReqstateError(
        'state_encoding',
        `a Date at ${path}: the state is CBOR, not JSON; store date.toISOString() or date.getTime() (the SDK's codec turns a Date into its ISO text and gives back a string)`,
      );
    }
    if (depth >= limit) {
      throw new ReqstateError('state_encoding', `the state nests deeper than ${limit} levels at ${path} (the format allows ${MAX_STATE_DEPTH}${wrapped ? `, this codec's envelope takes ${wrapped}` : ''})`);
    }
    if (seen.has(v)) throw new ReqstateError('state_encoding', `a cycle at ${path}`);
    seen.add(v);
    if (Array.isArray(v)) v.forEach((x, i) => go(x, `${path}[${i}]`, depth + 1));
    else if (v instanceof Map) for (const [k, x] of v) go(x, `${path}.${String(k)}`, depth + 1);
    else if (isPlainObject(v)) for (const [k, x] of Object.entries(v)) go(x, `${path}.${k}`, depth + 1);
    seen.delete(v);
  };
  go(value, '$', 0);
}

function policyWithLeeway(options: { policy?: Policy | PolicyOptions; clockLeewaySeconds?: number }): Policy | PolicyOptions | undefined {
  const leeway = options.clockLeewaySeconds;
  if (leeway === undefined) return options.policy;
  const p = options.policy;
  if (p instanceof Policy) {
    if (p.clockLeeway !== leeway) throw new ReqstateError('invalid_argument', `clockLeewaySeconds ${leeway} differs from the given policy's clock leeway ${p.clockLeeway}`);
    return p;
  }
  if (p?.clockLeeway !== undefined && p.clockLeeway !== leeway) {
    throw new ReqstateError('invalid_argument', `clockLeewaySeconds ${leeway} differs from policy.clockLeeway ${p.clockLeeway}`);
  }
  return { ...p, clockLeeway: leeway };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);
}

function fail(): never {
  throw new ReqstateError(
    'invalid_keyring',
    'createRequestStateCodec needs `keyring` or `codec`, and `keyring` is undefined (an unset environment variable such as REQSTATE_KEYS?): make a keyring with `npx reqstate-ts keys new` (docs/KEYRING.md, "The compact form")',
  );
}
