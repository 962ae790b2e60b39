// The tools of the conformance servers' contract (docs: /work/briefs design, "The conformance
// servers' contract"; the suite's fixtures are the SEP-2322 scenarios of
// @modelcontextprotocol/conformance 0.2.0-alpha.12), shared by the Node entry (node.ts) and the
// Worker entry (worker.ts).
//
// Every round mints its requestState with reqstate through the wiring's `inputRequired(ctx, …)`
// (the step bound into the token is the set of keys the round asked), and a round whose asked keys
// are not all answered is asked again (SEP-2322: missing or partial inputResponses get a new
// InputRequiredResult, not an error). What earlier rounds learned travels in the token's state.
import {
  McpServer,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  type InputRequest,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { McpRequestStateCodec } from '@reqstate/codec';

/** The requestState wiring: `@reqstate/codec`'s MCP codec, bound to the server (`requestState.bind`). */
export type Wiring = McpRequestStateCodec<Carried>;

/** State carried between rounds (the token's whole state): what was answered so far, and which round. */
export interface Carried {
  answers: Record<string, unknown>;
  round?: number;
}

type Asks = Record<string, InputRequest>;

const elicitName = (message: string): InputRequest =>
  inputRequired.elicit({
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  });

const pick = (asks: Asks, keys: string[]): Asks => Object.fromEntries(keys.map((k) => [k, asks[k]]));

/** The answer of one key, as the text a result shows. */
function answerText(responses: Record<string, unknown> | undefined, key: string): string {
  const r = inputResponse(responses, key);
  switch (r.kind) {
    case 'elicit':
      return r.action === 'accept' ? JSON.stringify(r.content ?? {}) : `(${r.action})`;
    case 'sampling': {
      const c = r.result.content as { type?: string; text?: string } | Array<{ type?: string; text?: string }>;
      const first = Array.isArray(c) ? c[0] : c;
      return first?.type === 'text' ? String(first.text) : JSON.stringify(c);
    }
    case 'roots':
      return r.roots.map((root) => root.uri).join(', ') || '(no roots)';
    default:
      return '(missing)';
  }
}

/** The asked keys `responses` does not answer with a response of a known kind (missing, or not a response at all). */
function unansweredIn(responses: Record<string, unknown> | undefined, keys: string[]): string[] {
  return keys.filter((k) => inputResponse(responses, k).kind === 'missing');
}

/**
 * One multi-round flow: `rounds[i]` are the requests of round i (given what earlier rounds answered);
 * `done` builds the result from all answers. A round with unanswered keys is asked again, only for
 * those keys; the answers already given travel in the state.
 *
 * `ephemeral`: the first round carries no server state, so answers to all of its keys complete it
 * without a requestState (SEP-2322's ephemeral flow, which the suite's `ignore-extra-params`
 * scenario exercises on the elicitation tool). Flows whose later rounds depend on the state
 * (`reqstate_adversarial`, the multi-round tool) are not ephemeral: without a verified requestState
 * they start over.
 */
async function flow<R>(
  wiring: Wiring,
  ctx: ServerContext,
  rounds: Array<(answers: Record<string, unknown>) => Asks>,
  done: (answers: Record<string, unknown>) => R,
  { ephemeral = false }: { ephemeral?: boolean } = {},
): Promise<R | InputRequiredResult> {
  const responses = ctx.mcpReq.inputResponses;
  let state = ctx.mcpReq.requestState<Carried>();
  if (state === undefined || typeof state !== 'object' || state === null) {
    const first = rounds[0]({});
    if (!ephemeral || unansweredIn(responses, Object.keys(first)).length > 0) {
      return wiring.inputRequired(ctx, { inputRequests: first, state: { answers: {}, round: 0 } satisfies Carried });
    }
    state = { answers: {}, round: 0 };
  }
  const round = state.round ?? 0;
  const asks = rounds[round](state.answers);
  const asked = Object.keys(asks);
  // The codec's unanswered keys (absent, or dropped by the SDK as malformed; null: it cannot name
  // them, so every key this round asked), plus answers of no known response shape.
  const fromCodec = ctx.mcpReq.requestState() === undefined ? [] : (wiring.unanswered(ctx) ?? asked);
  const missing = [...new Set([...fromCodec, ...unansweredIn(responses, asked)])];
  const answers = { ...state.answers };
  for (const key of asked) if (!missing.includes(key)) answers[key] = responses?.[key];
  if (missing.length > 0) {
    return wiring.inputRequired(ctx, { inputRequests: pick(asks, missing), state: { answers, round } satisfies Carried });
  }
  if (round + 1 < rounds.length) {
    return wiring.inputRequired(ctx, { inputRequests: rounds[round + 1](answers), state: { answers, round: round + 1 } satisfies Carried });
  }
  return done(answers);
}

const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

/** The conformance server: a fresh McpServer with every tool and prompt of the contract. */
export function createServer(wiring: Wiring): McpServer {
  const server = new McpServer({ name: 'reqstate-conformance-ts', version: '0.0.0' }, { capabilities: { tools: {}, prompts: {} } });

  server.registerTool('test_input_required_result_elicitation', { description: 'SEP-2322: one elicitation' }, (ctx) =>
    flow(wiring, ctx, [() => ({ user_name: elicitName('What is your name?') })], (a) => {
      const r = inputResponse(a, 'user_name');
      const name = r.kind === 'elicit' && r.action === 'accept' ? String(r.content?.name ?? '') : 'stranger';
      return text(`Hello, ${name}!`);
    }, { ephemeral: true }),
  );

  server.registerTool('test_input_required_result_sampling', { description: 'SEP-2322: one sampling request' }, (ctx) =>
    flow(
      wiring,
      ctx,
      [
        () => ({
          capital_question: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
            maxTokens: 100,
          }),
        }),
      ],
      (a) => text(`The model answered: ${answerText(a, 'capital_question')}`),
      { ephemeral: true },
    ),
  );

  server.registerTool('test_input_required_result_list_roots', { description: 'SEP-2322: one roots/list request' }, (ctx) =>
    flow(wiring, ctx, [() => ({ client_roots: inputRequired.listRoots() })], (a) => text(`Your roots: ${answerText(a, 'client_roots')}`), {
      ephemeral: true,
    }),
  );

  const confirmOk = () => ({
    confirm: inputRequired.elicit({
      message: 'Please confirm',
      requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
    }),
  });
  server.registerTool('test_input_required_result_request_state', { description: 'SEP-2322: requestState round trip' }, (ctx) =>
    flow(wiring, ctx, [confirmOk], (a) => text(`state-ok: the requestState verified; confirm = ${answerText(a, 'confirm')}`)),
  );
  server.registerTool('test_input_required_result_tampered_state', { description: 'SEP-2322: a tampered requestState is refused' }, (ctx) =>
    flow(wiring, ctx, [confirmOk], (a) => text(`state-ok: the requestState verified; confirm = ${answerText(a, 'confirm')}`)),
  );

  server.registerTool('test_input_required_result_multiple_inputs', { description: 'SEP-2322: three input requests in one round' }, (ctx) =>
    flow(
      wiring,
      ctx,
      [
        () => ({
          user_name: elicitName('What is your name?'),
          greeting: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
            maxTokens: 50,
          }),
          client_roots: inputRequired.listRoots(),
        }),
      ],
      (a) =>
        text(`name: ${answerText(a, 'user_name')}; greeting: ${answerText(a, 'greeting')}; roots: ${answerText(a, 'client_roots')}`),
    ),
  );

  server.registerTool('test_input_required_result_multi_round', { description: 'SEP-2322: two rounds, evolving state' }, (ctx) =>
    flow(
      wiring,
      ctx,
      [
        () => ({ step1: elicitName('Step 1: What is your name?') }),
        () => ({
          step2: inputRequired.elicit({
            message: 'Step 2: What is your favorite color?',
            requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
          }),
        }),
      ],
      (a) => text(`step1: ${answerText(a, 'step1')}; step2: ${answerText(a, 'step2')}`),
    ),
  );

  server.registerPrompt('test_input_required_result_prompt', { description: 'SEP-2322 on prompts/get' }, (ctx) =>
    flow(
      wiring,
      ctx,
      [
        () => ({
          user_context: inputRequired.elicit({
            message: 'What context should the prompt use?',
            requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
          }),
        }),
      ],
      (a) => ({
        messages: [{ role: 'user' as const, content: { type: 'text' as const, text: `Use this context: ${answerText(a, 'user_context')}` } }],
      }),
      { ephemeral: true },
    ),
  );

  // input-required-result-capability-check (its fixture is named in the scenario's code, not in its
  // one-line summary): ask only for what the client's per-request capabilities say it supports.
  server.registerTool('test_input_required_result_capabilities', { description: 'SEP-2322: input requests follow the client capabilities' }, (ctx) => {
    const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
    const caps = (envelope['io.modelcontextprotocol/clientCapabilities'] ?? envelope.clientCapabilities ?? {}) as Record<string, unknown>;
    const asks = (): Asks => ({
      ...(caps.sampling ? { capital_question: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 }) } : {}),
      ...(caps.elicitation ? { user_name: elicitName('What is your name?') } : {}),
      ...(caps.roots ? { client_roots: inputRequired.listRoots() } : {}),
    });
    if (Object.keys(asks()).length === 0) return text('The client declared no capability to ask with.');
    return flow(wiring, ctx, [asks], (a) => text(`answers: ${Object.keys(a).map((k) => `${k}=${answerText(a, k)}`).join('; ')}`));
  });

  // The adversarial checks' tool: round 1 asks `confirm`, round 2 answers `n=<n> confirmed`.
  server.registerTool(
    'reqstate_adversarial',
    {
      description: 'Two rounds bound to n: asks confirm, then answers n=<n> confirmed',
      inputSchema: fromJsonSchema<{ n: number }>({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }),
    },
    ({ n }, ctx) =>
      flow(
        wiring,
        ctx,
        [
          () => ({
            confirm: inputRequired.elicit({
              message: `Confirm n=${n}?`,
              requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
            }),
          }),
        ],
        () => text(`n=${n} confirmed`),
      ),
  );

  // The cross-language check's tool (cross.mjs): the same two rounds as the Python server's
  // `reqstate_cross`, so a round minted by either server completes on the other (one keyring, one
  // audience). Its state is {"n": n}; a state minted by the Python drop-in (Python states are text)
  // arrives as that object's JSON text.
  server.registerTool(
    'reqstate_cross',
    {
      description: 'Two rounds bound to n, state {"n": n}: asks confirm, then answers n=<n> state=<the state as JSON>',
      inputSchema: fromJsonSchema<{ n: number }>({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }),
    },
    async ({ n }, ctx) => {
      const raw = ctx.mcpReq.requestState<unknown>();
      const confirm = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
      if (raw === undefined || wiring.unanswered(ctx)?.length !== 0 || confirm.kind !== 'elicit') {
        const asks = {
          confirm: inputRequired.elicit({
            message: `Confirm n=${n}?`,
            requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
          }),
        };
        return wiring.inputRequired(ctx, { inputRequests: asks, state: { n } as unknown as Carried });
      }
      const state: unknown = typeof raw === 'string' ? JSON.parse(raw) : raw;
      return text(`n=${n} state=${JSON.stringify(state)}`);
    },
  );

  return server;
}

/**
 * The caller of a request: `Authorization: Bearer <name>` (a test-only verifier) is the OAuth client
 * `conformance` with the subject `<name>` (the drop-in binds `["conformance",null,"<name>"]`, as the
 * Python server's verifier does), else none (the drop-in binds `null`).
 */
export function authInfoOf(request: Request): { token: string; clientId: string; scopes: string[]; extra: { sub: string } } | undefined {
  const m = /^Bearer\s+(\S+)$/i.exec(request.headers.get('authorization') ?? '');
  return m ? { token: m[1], clientId: 'conformance', scopes: [], extra: { sub: m[1] } } : undefined;
}
