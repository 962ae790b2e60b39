// @ts-check
// Re-entrant MCP tool handlers whose `requestState` is minted and verified by
// the reqstate sidecar. The same function runs on the first call and on every
// retry; it branches on whether `requestState` and `inputResponses` are
// present. Nothing is kept on the server between rounds: what the next round
// needs travels in the token, bound to the tool name and to the caller
// (principal, audience, method and a digest of the sorted-key JSON
// arguments), so a token replayed to another tool, by another caller or with
// changed arguments is refused.
//
// The confirmation round of increase-counter commits the increase, so its
// token is single-use: the retry that confirms is accepted once (the sidecar
// records the token as spent, across every sidecar sharing its replay
// store), and replaying it gets InvalidRequestStateError (-32602), so the
// increase cannot be committed twice.
//
// The handlers are SDK-neutral: they take `{ arguments, inputResponses,
// requestState, principal, method }` and return an MCP result (a
// `resultType: "input_required"` result or a plain tool result). See
// test/mcp-sdk.test.js for the wiring into the official TypeScript SDK.
import { Client, callContext } from '@reqstate/client';

/** The token failed verification: answer the MCP request with -32602. */
export class InvalidRequestStateError extends Error {
  /** @param {string} reason e.g. "REASON_AUTHENTICATION_FAILED" */
  constructor(reason) {
    super(`Invalid or expired requestState (${reason})`);
    this.name = 'InvalidRequestStateError';
    this.reason = reason;
  }
}

/**
 * @typedef {object} ToolRequest
 * @property {Record<string, unknown>} [arguments] the tool call's arguments
 * @property {Record<string, any>} [inputResponses] answers to the previous round's inputRequests
 * @property {string} [requestState] the token echoed by the client
 * @property {string} principal who is calling (from your authentication)
 * @property {string} [method] the MCP method, "tools/call"
 */

/**
 * @param {{ client: Client, audience?: string, ttlSeconds?: number, onCommit?: (current: number, amount: number) => void }} options
 *   `onCommit` is the effect of a confirmed increase (say, writing the new
 *   value to a database); it runs once per confirmation.
 */
export function createHandlers({ client, audience = 'counter-server', ttlSeconds = 600, onCommit }) {
  /** The context the token is bound to: this caller, this server, this method, these arguments. */
  const contextOf = (/** @type {ToolRequest} */ req) =>
    callContext({ principal: req.principal, audience, method: req.method ?? 'tools/call', arguments: req.arguments ?? {} });

  /**
   * A token for the next round; `singleUse` for the round whose retry commits an effect.
   * @param {string} tool @param {string} step @param {unknown} state @param {ToolRequest} req
   */
  async function mintState(tool, step, state, req, singleUse = false) {
    const { token } = await client.mint({ tool, step, stateJson: JSON.stringify(state), ttlSeconds, context: contextOf(req), singleUse });
    return token;
  }

  /**
   * The verified state of the echoed token, or a thrown InvalidRequestStateError.
   * A single-use token (the sidecar answers REASON_SINGLE_USE from its header
   * alone) is then consumed: accepted once, REASON_REPLAYED afterwards.
   * @param {string} tool @param {ToolRequest} req
   * @returns {Promise<{ step: string, state: any }>}
   */
  async function verifyState(tool, req) {
    const request = { token: String(req.requestState), tool, context: contextOf(req) };
    let verified = await client.verify(request);
    if (!verified.valid && verified.reason === 'REASON_SINGLE_USE') verified = await client.verify({ ...request, consume: true });
    if (!verified.valid) throw new InvalidRequestStateError(verified.reason);
    return { step: verified.step, state: JSON.parse(verified.stateJson ?? 'null') };
  }

  /** @param {string} message @param {Record<string, unknown>} properties @param {string[]} required */
  const elicit = (message, properties, required) => ({
    method: 'elicitation/create',
    params: { mode: 'form', message, requestedSchema: { type: 'object', properties, required } },
  });

  /** @param {unknown} answer */
  const accepted = (answer) => {
    const a = /** @type {any} */ (answer);
    return a && a.action === 'accept' && a.content && typeof a.content === 'object' ? a.content : undefined;
  };

  return {
    /** Asks the caller's name, then greets them. */
    async whoami(/** @type {ToolRequest} */ req) {
      if (req.requestState !== undefined) {
        await verifyState('whoami', req);
        const name = accepted(req.inputResponses?.username)?.name;
        if (typeof name === 'string' && name !== '') {
          return { content: [{ type: 'text', text: `Hello, ${name}!` }] };
        }
      }
      return {
        resultType: 'input_required',
        inputRequests: { username: elicit('What is your name?', { name: { type: 'string' } }, ['name']) },
        requestState: await mintState('whoami', 'username', {}, req),
      };
    },

    /**
     * `increase-counter { current }`: round 1 asks the amount, round 2 asks
     * for confirmation carrying `{ current, amount }` in a single-use state,
     * round 3 commits the increase and returns the new value.
     */
    async 'increase-counter'(/** @type {ToolRequest} */ req) {
      const tool = 'increase-counter';
      if (req.requestState === undefined) {
        // First call: remember the current value, ask by how much.
        const current = Number(req.arguments?.current ?? 0);
        return {
          resultType: 'input_required',
          inputRequests: { amount: elicit('By how much should the counter increase?', { amount: { type: 'number' } }, ['amount']) },
          requestState: await mintState(tool, 'amount', { current }, req),
        };
      }
      const { step, state } = await verifyState(tool, req);
      if (step === 'amount') {
        const amount = accepted(req.inputResponses?.amount)?.amount;
        if (typeof amount !== 'number' || !Number.isFinite(amount)) {
          return { content: [{ type: 'text', text: 'No amount given; the counter is unchanged.' }], isError: true };
        }
        return {
          resultType: 'input_required',
          inputRequests: {
            confirm: elicit(`Increase the counter from ${state.current} by ${amount}?`, { confirm: { type: 'boolean' } }, ['confirm']),
          },
          // Single-use: the retry that answers commits the increase, once.
          requestState: await mintState(tool, 'confirm', { current: state.current, amount }, req, true),
        };
      }
      if (step === 'confirm') {
        if (accepted(req.inputResponses?.confirm)?.confirm !== true) {
          return { content: [{ type: 'text', text: `Cancelled; the counter stays at ${state.current}.` }] };
        }
        const value = state.current + state.amount;
        onCommit?.(state.current, state.amount);
        return { content: [{ type: 'text', text: `The counter is now ${value}.` }], structuredContent: { value } };
      }
      throw new InvalidRequestStateError('REASON_WRONG_STEP');
    },
  };
}
