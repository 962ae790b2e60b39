// @ts-check
// The handlers in a real server of the official TypeScript MCP SDK (v2,
// @modelcontextprotocol/server), driven by the SDK's own client
// (@modelcontextprotocol/client), which answers the elicitations and retries
// `input_required` results itself; requestState minted and verified by a
// real reqstate sidecar.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client as McpClient, InMemoryTransport } from '@modelcontextprotocol/client';
import { Client, callContext } from '@reqstate/client';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { createMcpServer } from '../examples/mcp-server.js';
import { Sidecar } from './support/sidecar.js';

/** @type {Sidecar} */
let sidecar;
/** @type {Client} */
let reqstate;

before(async () => {
  sidecar = await Sidecar.start({ authToken: 'mcp-token' });
  reqstate = new Client(sidecar.tcpTarget, { token: 'mcp-token' });
});
after(async () => {
  reqstate?.close();
  await sidecar?.stop();
});

/**
 * A connected SDK client/server pair. `answers` maps an elicitation message
 * prefix to the content the "user" gives. `onCommit` observes the increases
 * the server commits; `sidecarClient` is the reqstate client of the server
 * (default: the shared one).
 * @param {{ autoFulfill?: boolean, onCommit?: (current: number, amount: number) => void, sidecarClient?: Client }} [options]
 */
async function connect(options = {}) {
  /** @type {Error[]} */
  const serverErrors = [];
  const mcp = new McpClient(
    { name: 'test-client', version: '0.0.0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      inputRequired: { autoFulfill: options.autoFulfill ?? true },
    },
  );
  /** @type {string[]} */
  const asked = [];
  mcp.setRequestHandler('elicitation/create', async (request) => /** @type {any} */ (await answer(request)));
  /** @param {any} request */
  async function answer(request) {
    const message = String(request.params.message);
    asked.push(message);
    if (message.startsWith('By how much')) return { action: 'accept', content: { amount: 5 } };
    if (message.startsWith('Increase the counter')) return { action: 'accept', content: { confirm: true } };
    if (message.startsWith('What is your name')) return { action: 'accept', content: { name: 'Ada' } };
    return { action: 'decline' };
  }
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  // The SDK's serving entry picks the protocol era from the opening exchange
  // (server/discover for 2026-07-28) and builds a server from the factory.
  const server = () =>
    createMcpServer({ client: options.sidecarClient ?? reqstate, principalOf: () => 'user-42', onCommit: options.onCommit });
  const served = await serveStdio(server, {
    transport: serverTransport,
    legacy: 'reject',
    onerror: (e) => serverErrors.push(e),
  });
  await mcp.connect(clientTransport);
  return {
    mcp,
    asked,
    serverErrors,
    async close() {
      await mcp.close();
      await served.close();
    },
  };
}

/** @param {string} token */
function tamper(token) {
  const i = Math.floor(token.length / 2);
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

describe('official TypeScript MCP SDK (v2) server and client', () => {
  test('increase-counter: the SDK client drives all three rounds, 10 + 5 = 15', async () => {
    const { mcp, asked, close } = await connect();
    try {
      const tools = await mcp.listTools();
      assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['increase-counter', 'whoami']);
      const result = await mcp.callTool({ name: 'increase-counter', arguments: { current: 10 } });
      assert.deepEqual(result.content, [{ type: 'text', text: 'The counter is now 15.' }]);
      assert.equal(result.isError ?? false, false);
      assert.equal(asked.length, 2);
      assert.match(asked[0], /^By how much/);
      assert.match(asked[1], /from 10 by 5/);
    } finally {
      await close();
    }
  });

  test('whoami: one elicitation round', async () => {
    const { mcp, close } = await connect();
    try {
      const result = await mcp.callTool({ name: 'whoami', arguments: {} });
      assert.deepEqual(result.content, [{ type: 'text', text: 'Hello, Ada!' }]);
    } finally {
      await close();
    }
  });

  test('manual rounds: a tampered requestState or changed arguments get -32602', async () => {
    const { mcp, close } = await connect({ autoFulfill: false });
    try {
      const opts = { allowInputRequired: true };
      const round1 = /** @type {any} */ (await mcp.callTool({ name: 'increase-counter', arguments: { current: 10 } }, opts));
      assert.equal(round1.resultType, 'input_required');
      assert.equal(typeof round1.requestState, 'string');
      // The requestState the SDK carried is a reqstate token, bound to this call.
      const carried = await reqstate.verify({
        token: round1.requestState,
        tool: 'increase-counter',
        expectedStep: 'amount',
        context: callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', arguments: { current: 10 } }),
      });
      assert.ok(carried.valid);
      assert.deepEqual(JSON.parse(carried.stateJson ?? ''), { current: 10 });

      const amount = { amount: { action: 'accept', content: { amount: 5 } } };
      const round2 = /** @type {any} */ (
        await mcp.callTool(
          /** @type {any} */ ({ name: 'increase-counter', arguments: { current: 10 }, inputResponses: amount, requestState: round1.requestState }),
          opts,
        )
      );
      assert.equal(round2.resultType, 'input_required');
      assert.ok(round2.inputRequests.confirm);

      const confirm = { confirm: { action: 'accept', content: { confirm: true } } };
      const isInvalidState = (/** @type {any} */ err) => {
        assert.equal(err.code, -32602, String(err));
        assert.match(String(err.message), /Invalid or expired requestState/);
        return true;
      };
      await assert.rejects(
        mcp.callTool(
          /** @type {any} */ ({ name: 'increase-counter', arguments: { current: 10 }, inputResponses: confirm, requestState: tamper(round2.requestState) }),
          opts,
        ),
        isInvalidState,
      );
      await assert.rejects(
        mcp.callTool(
          /** @type {any} */ ({ name: 'increase-counter', arguments: { current: 1000 }, inputResponses: confirm, requestState: round2.requestState }),
          opts,
        ),
        isInvalidState,
      );
      // The genuine token with the original arguments still completes the flow.
      const round3 = /** @type {any} */ (
        await mcp.callTool(
          /** @type {any} */ ({ name: 'increase-counter', arguments: { current: 10 }, inputResponses: confirm, requestState: round2.requestState }),
          opts,
        )
      );
      assert.deepEqual(round3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
    } finally {
      await close();
    }
  });

  test('single-use final round: the flow completes once; replaying its retry gets -32602, committed once', async () => {
    /** @type {Array<[number, number]>} */
    const commits = [];
    const onCommit = (/** @type {number} */ current, /** @type {number} */ amount) => void commits.push([current, amount]);

    // The SDK's client drives the whole flow by itself: one commit.
    const auto = await connect({ onCommit });
    try {
      const result = await auto.mcp.callTool({ name: 'increase-counter', arguments: { current: 10 } });
      assert.deepEqual(result.content, [{ type: 'text', text: 'The counter is now 15.' }]);
      assert.deepEqual(commits, [[10, 5]]);
    } finally {
      await auto.close();
    }

    // By hand, to hold on to the last round's requestState and replay its retry.
    const { mcp, close } = await connect({ autoFulfill: false, onCommit });
    const opts = { allowInputRequired: true };
    const args = { current: 10 };
    const amount = { amount: { action: 'accept', content: { amount: 5 } } };
    const confirm = { confirm: { action: 'accept', content: { confirm: true } } };
    /** @param {string} requestState */
    const retry = (requestState) =>
      mcp.callTool(/** @type {any} */ ({ name: 'increase-counter', arguments: args, inputResponses: confirm, requestState }), opts);
    const isInvalidState = (/** @type {any} */ err) => {
      assert.equal(err.code, -32602, String(err));
      assert.match(String(err.message), /Invalid or expired requestState/);
      return true;
    };
    /** @type {string} */
    let last;
    try {
      const round1 = /** @type {any} */ (await mcp.callTool({ name: 'increase-counter', arguments: args }, opts));
      const round2 = /** @type {any} */ (
        await mcp.callTool(/** @type {any} */ ({ name: 'increase-counter', arguments: args, inputResponses: amount, requestState: round1.requestState }), opts)
      );
      assert.equal(round2.resultType, 'input_required');
      last = round2.requestState;
      // The last round's state is single-use: a plain verify refuses it without spending it.
      const context = callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', arguments: args });
      const peeked = await reqstate.verify({ token: last, tool: 'increase-counter', context });
      assert.equal(peeked.valid ? 'valid' : peeked.reason, 'REASON_SINGLE_USE');
      const round1State = await reqstate.verify({ token: round1.requestState, tool: 'increase-counter', context });
      assert.ok(round1State.valid, 'round 1 is not single-use');

      const round3 = /** @type {any} */ (await retry(last));
      assert.deepEqual(round3.content, [{ type: 'text', text: 'The counter is now 15.' }]);
      assert.deepEqual(commits, [[10, 5], [10, 5]]);

      // The same requestState with the same inputResponses, again and again.
      await assert.rejects(retry(last), isInvalidState);
      await assert.rejects(retry(last), isInvalidState);
      const spent = await reqstate.verify({ token: last, tool: 'increase-counter', context, consume: true });
      assert.equal(spent.valid ? 'valid' : spent.reason, 'REASON_REPLAYED');
    } finally {
      await close();
    }

    // Another server replica (its own connection to the sidecar): refused too.
    const replicaClient = new Client(sidecar.unixTarget, { token: 'mcp-token' });
    const replica = await connect({ autoFulfill: false, onCommit, sidecarClient: replicaClient });
    try {
      await assert.rejects(
        replica.mcp.callTool(/** @type {any} */ ({ name: 'increase-counter', arguments: args, inputResponses: confirm, requestState: last }), opts),
        isInvalidState,
      );
    } finally {
      await replica.close();
      replicaClient.close();
    }
    assert.deepEqual(commits, [[10, 5], [10, 5]], 'one commit per completed flow, none for the replays');
  });
});
