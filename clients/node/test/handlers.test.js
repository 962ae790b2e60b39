// @ts-check
// examples/handlers.js end to end through a real sidecar, called the way an
// MCP server calls them: the same function on the first call and on each
// retry, the client echoing requestState and adding inputResponses.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, callContext } from '@reqstate/client';
import { createHandlers, InvalidRequestStateError } from '../examples/handlers.js';
import { Sidecar, freePort } from './support/sidecar.js';

/** @type {Sidecar} */
let sidecar;
/** @type {Client} */
let client;
/** @type {ReturnType<typeof createHandlers>} */
let handlers;
/** What `onCommit` saw, reset before each test: the effects committed. @type {Array<[number, number]>} */
let commits = [];
// The results are MCP result objects; read them loosely.
/** @typedef {any} Result */

before(async () => {
  sidecar = await Sidecar.start({ authToken: 'handler-token' });
  client = new Client(sidecar.unixTarget, { token: 'handler-token' });
  handlers = createHandlers({ client, onCommit: (current, amount) => commits.push([current, amount]) });
});
after(async () => {
  client?.close();
  await sidecar?.stop();
});

/** @param {Record<string, unknown>} content */
const accept = (content) => ({ action: 'accept', content });
/** @param {string} token */
function tamper(token) {
  const i = Math.floor(token.length / 2);
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

describe('increase-counter', () => {
  const call = { principal: 'user-42', method: 'tools/call', arguments: { current: 10 } };
  beforeEach(() => {
    commits = [];
  });

  test('three rounds: current 10, amount 5 -> 15', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    assert.equal(round1.resultType, 'input_required');
    assert.equal(round1.inputRequests?.amount.method, 'elicitation/create');
    assert.equal(typeof round1.requestState, 'string');

    const round2 = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: { amount: accept({ amount: 5 }) } }));
    assert.equal(round2.resultType, 'input_required');
    assert.equal(round2.inputRequests?.confirm.method, 'elicitation/create');
    assert.match(round2.inputRequests?.confirm.params.message, /from 10 by 5/);
    // The state the confirmation round carries is {current, amount}, under the
    // sidecar's key, in a single-use token: a plain verify refuses it (and does not spend it).
    const confirmToken = {
      token: String(round2.requestState),
      tool: 'increase-counter',
      expectedStep: 'confirm',
      context: callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', arguments: { current: 10 } }),
    };
    const peeked = await client.verify(confirmToken);
    assert.equal(peeked.valid, false);
    assert.equal(!peeked.valid && peeked.reason, 'REASON_SINGLE_USE');

    const round3 = /** @type {Result} */ (await handler({ ...call, requestState: round2.requestState, inputResponses: { confirm: accept({ confirm: true }) } }));
    assert.equal(round3.resultType, undefined);
    assert.deepEqual(round3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
    assert.deepEqual(round3.structuredContent, { value: 15 });
    assert.deepEqual(commits, [[10, 5]]);
    // The handler consumed it.
    const spent = await client.verify({ ...confirmToken, consume: true });
    assert.equal(!spent.valid && spent.reason, 'REASON_REPLAYED');
  });

  test('the confirmation is single-use: a replayed retry is refused, the increase committed once', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    const amount = { amount: accept({ amount: 5 }) };
    const round2 = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: amount }));
    // Round 1's state is not single-use: retried, it mints another, distinct confirmation token.
    const round2again = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: amount }));
    assert.notEqual(round2again.requestState, round2.requestState);

    const confirm = { ...call, requestState: round2.requestState, inputResponses: { confirm: accept({ confirm: true }) } };
    const round3 = /** @type {Result} */ (await handler(confirm));
    assert.deepEqual(round3.structuredContent, { value: 15 });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(handler(confirm), (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_REPLAYED');
    }
    assert.deepEqual(commits, [[10, 5]]);
    // A refused presentation (another caller) does not spend the other token.
    await assert.rejects(
      handler({ ...confirm, principal: 'user-43', requestState: round2again.requestState }),
      (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_AUTHENTICATION_FAILED',
    );
    const other = /** @type {Result} */ (await handler({ ...confirm, requestState: round2again.requestState }));
    assert.deepEqual(other.structuredContent, { value: 15 });
    assert.deepEqual(commits, [[10, 5], [10, 5]]);
  });

  test('the arguments keys order does not matter (sorted-key digest)', async () => {
    const handler = handlers['increase-counter'];
    const args = { current: 10, note: 'x' };
    const round1 = /** @type {Result} */ (await handler({ ...call, arguments: args }));
    const round2 = /** @type {Result} */ (await handler({
      ...call,
      arguments: { note: 'x', current: 10 },
      requestState: round1.requestState,
      inputResponses: { amount: accept({ amount: 1 }) },
    }));
    assert.equal(round2.resultType, 'input_required');
  });

  test('a declined confirmation leaves the counter unchanged', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    const round2 = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: { amount: accept({ amount: 5 }) } }));
    const round3 = /** @type {Result} */ (await handler({ ...call, requestState: round2.requestState, inputResponses: { confirm: { action: 'decline' } } }));
    assert.match(round3.content[0].text, /stays at 10/);
  });

  test('a tampered requestState is refused', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    await assert.rejects(
      handler({ ...call, requestState: tamper(String(round1.requestState)), inputResponses: { amount: accept({ amount: 5 }) } }),
      (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_AUTHENTICATION_FAILED',
    );
    await assert.rejects(
      handler({ ...call, requestState: 'garbage', inputResponses: { amount: accept({ amount: 5 }) } }),
      (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_MALFORMED',
    );
  });

  test('changed arguments on the retry are refused', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    const round2 = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: { amount: accept({ amount: 5 }) } }));
    await assert.rejects(
      handler({ ...call, arguments: { current: 1000 }, requestState: round2.requestState, inputResponses: { confirm: accept({ confirm: true }) } }),
      (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_AUTHENTICATION_FAILED',
    );
  });

  test('another principal, or a token for another tool, is refused', async () => {
    const handler = handlers['increase-counter'];
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    await assert.rejects(
      handler({ ...call, principal: 'user-43', requestState: round1.requestState, inputResponses: { amount: accept({ amount: 5 }) } }),
      InvalidRequestStateError,
    );
    const who = /** @type {Result} */ (await handlers.whoami({ principal: 'user-42', method: 'tools/call', arguments: { current: 10 } }));
    await assert.rejects(
      handler({ ...call, requestState: who.requestState, inputResponses: { amount: accept({ amount: 5 }) } }),
      InvalidRequestStateError,
    );
  });
});

test('increase-counter without a working replay store: the confirmation fails closed, nothing committed', async () => {
  const port = await freePort();
  const cutOff = await Sidecar.start({ args: ['--replay-store', `redis://127.0.0.1:${port}`, '--replay-timeout-ms', '200'] });
  const sidecarClient = new Client(cutOff.unixTarget);
  /** @type {Array<[number, number]>} */
  const committed = [];
  const handler = createHandlers({ client: sidecarClient, onCommit: (c, a) => committed.push([c, a]) })['increase-counter'];
  const call = { principal: 'user-42', method: 'tools/call', arguments: { current: 10 } };
  try {
    const round1 = /** @type {Result} */ (await handler({ ...call }));
    const round2 = /** @type {Result} */ (await handler({ ...call, requestState: round1.requestState, inputResponses: { amount: accept({ amount: 5 }) } }));
    await assert.rejects(
      handler({ ...call, requestState: round2.requestState, inputResponses: { confirm: accept({ confirm: true }) } }),
      (err) => err instanceof InvalidRequestStateError && err.reason === 'REASON_REPLAY_STORE_UNAVAILABLE',
    );
    assert.deepEqual(committed, []);
  } finally {
    sidecarClient.close();
    await cutOff.stop();
  }
});

describe('whoami', () => {
  const call = { principal: 'user-42', method: 'tools/call', arguments: {} };

  test('asks the name, then greets', async () => {
    const round1 = /** @type {Result} */ (await handlers.whoami({ ...call }));
    assert.equal(round1.resultType, 'input_required');
    assert.equal(round1.inputRequests?.username.params.message, 'What is your name?');
    const round2 = /** @type {Result} */ (await handlers.whoami({ ...call, requestState: round1.requestState, inputResponses: { username: accept({ name: 'Ada' }) } }));
    assert.deepEqual(round2.content, [{ type: 'text', text: 'Hello, Ada!' }]);
  });

  test('no answer yet: asks again', async () => {
    const round1 = /** @type {Result} */ (await handlers.whoami({ ...call }));
    const again = /** @type {Result} */ (await handlers.whoami({ ...call, requestState: round1.requestState, inputResponses: {} }));
    assert.equal(again.resultType, 'input_required');
  });

  test('a tampered requestState is refused', async () => {
    const round1 = /** @type {Result} */ (await handlers.whoami({ ...call }));
    await assert.rejects(
      handlers.whoami({ ...call, requestState: tamper(String(round1.requestState)), inputResponses: { username: accept({ name: 'Eve' }) } }),
      InvalidRequestStateError,
    );
  });
});
