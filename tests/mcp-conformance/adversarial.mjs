// The project's own adversarial checks of a conformance server (the suite's only tamper check
// appends "-TAMPERED", which any JSON parser refuses). Each refusal must be a JSON-RPC -32602 on the
// wire (with nothing more than the SDK's fixed message) AND one line in the server's log naming the
// reason: `reqstate refused <method> <tool>: <reason>: <message>`, <tool> quoted as in
// tests/vectors/mcp_log_names.json.
//
//   node tests/mcp-conformance/adversarial.mjs <url> <server-log-file>
//       the round-1 state of reqstate_adversarial sent to another tool, with n changed, by another
//       principal, with one byte flipped (several positions), and a round's state replayed with the
//       answers of another round (asked again, not accepted); plus the honest flow as a control.
//   node tests/mcp-conformance/adversarial.mjs --expiry <url> <server-log-file>
//       against a server started with REQSTATE_TTL_SECONDS=2 REQSTATE_CLOCK_LEEWAY_SECONDS=0: a
//       state answered at once completes; the same state 3 s later is refused as expired.
//   node tests/mcp-conformance/adversarial.mjs --cross <url> <log> <other-url> <other-log>
//       two servers in two languages on one keyring and one audience (the TypeScript and the Python
//       drop-in): a round of `reqstate_cross` minted by either completes on the other with its
//       state intact, and the same state with n changed or by another caller is refused there.
//
// Client: the official @modelcontextprotocol/client 2.4.0 (installed by servers/typescript's
// package.json), protocol 2026-07-28, with `Authorization: Bearer <name>` as the test principal.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

const require = createRequire(new URL('./servers/typescript/package.json', import.meta.url));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');

const args = process.argv.slice(2);
const expiryMode = args[0] === '--expiry';
const crossMode = args[0] === '--cross';
if (expiryMode || crossMode) args.shift();
if (args.length !== (crossMode ? 4 : 2)) {
  console.error('usage: node adversarial.mjs [--expiry] <url> <server-log-file>\n       node adversarial.mjs --cross <url> <log> <other-url> <other-log>');
  process.exit(64);
}
const [url, logFile, otherUrl, otherLogFile] = args;

const TOOL = 'reqstate_adversarial';
const CROSS_TOOL = 'reqstate_cross';
const OTHER_TOOL = 'test_input_required_result_request_state';
const CONFIRM = { confirm: { action: 'accept', content: { ok: true } } };

async function connect(principal, target) {
  const mcp = new Client(
    { name: 'reqstate-adversarial', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } },
  );
  const headers = principal ? { authorization: `Bearer ${principal}` } : {};
  await mcp.connect(new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } }));
  return mcp;
}

const clients = new Map();
async function client(principal, target) {
  const key = `${target} ${principal}`;
  if (!clients.has(key)) clients.set(key, await connect(principal, target));
  return clients.get(key);
}

async function call({ principal = 'alice', name = TOOL, n = 7, inputResponses, requestState, method = 'tools/call', target = url } = {}) {
  const mcp = await client(principal, target);
  if (method === 'prompts/get') {
    return mcp.getPrompt({ name, arguments: {}, ...(inputResponses && { inputResponses }), ...(requestState !== undefined && { requestState }) }, { allowInputRequired: true });
  }
  return mcp.callTool(
    { name, arguments: name === TOOL || name === CROSS_TOOL ? { n } : {}, ...(inputResponses && { inputResponses }), ...(requestState !== undefined && { requestState }) },
    { allowInputRequired: true },
  );
}

/** The log's lines written from `offset` on. */
const logText = (file = logFile) => readFileSync(file, 'utf8');
async function newRefusals(offset, file = logFile) {
  // The line is written before the response leaves; allow the log a moment to be flushed.
  for (let i = 0; i < 20; i++) {
    const lines = logText(file).slice(offset).split('\n').filter((l) => l.startsWith('reqstate refused '));
    if (lines.length > 0) return lines;
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

/** Asserts the call is refused with -32602 on the wire and one refusal line with a reason of `reasons` in the log. */
async function refused(label, reasons, tool, request, secrets = []) {
  const log = request.target === otherUrl && otherUrl !== undefined ? otherLogFile : logFile;
  const offset = logText(log).length;
  let error;
  try {
    const r = await call(request);
    assert.fail(`${label}: accepted (${JSON.stringify(r).slice(0, 200)}), expected -32602`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    error = e;
  }
  assert.equal(error.code, -32602, `${label}: wire error ${error.code} ${error.message}`);
  assert.match(String(error.message), /Invalid or expired requestState/, `${label}: wire message`);
  const lines = await newRefusals(offset, log);
  assert.equal(lines.length, 1, `${label}: expected one refusal line in ${log}, got ${JSON.stringify(lines)}`);
  const m = /^reqstate refused (\S+) (\S+): ([a-z_]+): (.+)$/.exec(lines[0]);
  assert.ok(m, `${label}: log line not in the contract's form: ${lines[0]}`);
  assert.equal(m[1], request.method ?? 'tools/call', `${label}: method in ${lines[0]}`);
  // The tool as the drop-ins quote a client's name (tests/vectors/mcp_log_names.json): these are
  // short printable ASCII names, so JSON.stringify writes the same.
  assert.equal(m[2], JSON.stringify(tool), `${label}: tool in ${lines[0]}`);
  assert.ok(reasons.includes(m[3]), `${label}: reason ${m[3]} not one of ${reasons.join('|')}: ${lines[0]}`);
  for (const s of secrets) assert.ok(!lines[0].includes(s), `${label}: the log line shows ${JSON.stringify(s)} in clear: ${lines[0]}`);
  console.log(`  ok  ${label}: -32602; log: ${m[3]}`);
}

function flip(token, position) {
  const bytes = Buffer.from(token, 'base64url');
  const i = position < 0 ? bytes.length + position : position;
  bytes[i] ^= 0x01;
  return bytes.toString('base64url');
}

async function round1(principal = 'alice', n = 7) {
  const r = await call({ principal, n });
  assert.equal(r.resultType, 'input_required', `round 1: ${JSON.stringify(r)}`);
  assert.deepEqual(Object.keys(r.inputRequests ?? {}), ['confirm'], 'round 1 asks confirm');
  assert.equal(typeof r.requestState, 'string', 'round 1 has a requestState');
  return r.requestState;
}

const textOf = (r) => (r.content ?? []).map((c) => c.text).join('');

async function main() {
  let checks = 0;
  const check = async (fn) => {
    await fn();
    checks++;
  };
  if (crossMode) {
    for (const [from, to] of [[url, otherUrl], [otherUrl, url]]) {
      const r1 = await call({ target: from, name: CROSS_TOOL, n: 3 });
      assert.equal(r1.resultType, 'input_required', `round 1 at ${from}: ${JSON.stringify(r1)}`);
      assert.deepEqual(Object.keys(r1.inputRequests ?? {}), ['confirm'], `round 1 at ${from} asks confirm`);
      await check(async () => {
        const r2 = await call({ target: to, name: CROSS_TOOL, n: 3, inputResponses: CONFIRM, requestState: r1.requestState });
        assert.equal(textOf(r2), 'n=3 state={"n":3}', `round 2 at ${to} of a round minted at ${from}: ${JSON.stringify(r2)}`);
        console.log(`  ok  minted by ${from}, completed by ${to}: n=3 state={"n":3}`);
      });
      await check(() => refused(`minted by ${from}, at ${to} with n changed (3 -> 4)`, ['authentication_failed'], CROSS_TOOL, { target: to, name: CROSS_TOOL, n: 4, inputResponses: CONFIRM, requestState: r1.requestState }));
      await check(() => refused(`minted by ${from}, at ${to} by another principal`, ['authentication_failed'], CROSS_TOOL, { target: to, principal: 'mallory', name: CROSS_TOOL, n: 3, inputResponses: CONFIRM, requestState: r1.requestState }, ['alice', 'mallory']));
    }
  } else if (expiryMode) {
    await check(async () => {
      const fresh = await round1();
      const r = await call({ inputResponses: CONFIRM, requestState: fresh });
      assert.equal(textOf(r), 'n=7 confirmed', `control: answered at once: ${JSON.stringify(r)}`);
      console.log('  ok  control: a 2 s state answered at once completes');
    });
    await check(async () => {
      const state = await round1();
      await new Promise((r) => setTimeout(r, 3200));
      await refused('after expiry (ttl 2 s, leeway 0, answered 3.2 s later)', ['expired'], TOOL, { inputResponses: CONFIRM, requestState: state });
    });
  } else {
    // Control: the honest flow completes (so the refusals below are the checks', not a broken server).
    await check(async () => {
      const state = await round1();
      const r = await call({ inputResponses: CONFIRM, requestState: state });
      assert.equal(r.resultType ?? 'complete', 'complete', JSON.stringify(r));
      assert.equal(textOf(r), 'n=7 confirmed');
      console.log(`  ok  control: round 1 then round 2 with the answer completes: n=7 confirmed (round-1 requestState: ${state.length} characters)`);
    });
    // Concurrency: eight flows in flight at once, each its own principal and n; every round 2 is
    // bound to its own call (one codec serves them all), and every cross-sent state is refused.
    await check(async () => {
      const ns = [1, 2, 3, 4, 5, 6, 7, 8];
      const states = await Promise.all(ns.map((n) => round1(`user${n}`, n)));
      const done = await Promise.all(ns.map((n, i) => call({ principal: `user${n}`, n, inputResponses: CONFIRM, requestState: states[i] })));
      done.forEach((r, i) => assert.equal(textOf(r), `n=${ns[i]} confirmed`, `concurrent flow ${ns[i]}: ${JSON.stringify(r)}`));
      const offset = logText().length;
      const crossed = await Promise.allSettled(ns.map((n, i) => call({ principal: `user${n}`, n, inputResponses: CONFIRM, requestState: states[(i + 1) % ns.length] })));
      crossed.forEach((r, i) => assert.ok(r.status === 'rejected' && r.reason?.code === -32602, `concurrent cross-sent state ${i}: ${JSON.stringify(r.value ?? r.reason?.message)}`));
      // Each refusal logged once (waiting for the log to catch up, so later checks see only their own lines).
      let lines = [];
      for (let i = 0; i < 40 && lines.length < ns.length; i++) {
        lines = logText().slice(offset).split('\n').filter((l) => l.startsWith('reqstate refused tools/call "reqstate_adversarial": authentication_failed: '));
        if (lines.length < ns.length) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(lines.length, ns.length, `concurrent cross-sent states: ${lines.length} refusal lines logged, expected ${ns.length}`);
      console.log('  ok  8 concurrent flows complete with their own n; 8 concurrent cross-sent states are refused');
    });
    const state = await round1();
    const bound = ['authentication_failed', 'wrong_tool'];
    await check(() => refused('sent to another tool', bound, OTHER_TOOL, { name: OTHER_TOOL, inputResponses: CONFIRM, requestState: state }));
    // The method binding: a prompt's state (prompts/get) sent to a tool, a tool's state sent to prompts/get.
    await check(async () => {
      const p1 = await call({ method: 'prompts/get', name: 'test_input_required_result_prompt' });
      assert.equal(p1.resultType, 'input_required', `prompt round 1: ${JSON.stringify(p1)}`);
      await refused('the prompt\'s state sent to tools/call', bound, OTHER_TOOL, { name: OTHER_TOOL, inputResponses: CONFIRM, requestState: p1.requestState });
    });
    await check(() => refused('sent to prompts/get (method changed)', bound, TOOL, { method: 'prompts/get', name: TOOL, inputResponses: CONFIRM, requestState: state }));
    await check(() => refused('with n changed (7 -> 8)', ['authentication_failed'], TOOL, { n: 8, inputResponses: CONFIRM, requestState: state }, ['"n":8', 'n=8']));
    await check(() =>
      refused('by another principal (alice -> mallory)', ['authentication_failed'], TOOL, { principal: 'mallory', inputResponses: CONFIRM, requestState: state }, ['alice', 'mallory']),
    );
    await check(() => refused('anonymous (no Authorization) with alice\'s state', ['authentication_failed'], TOOL, { principal: '', inputResponses: CONFIRM, requestState: state }, ['alice']));
    const len = Buffer.from(state, 'base64url').length;
    const positions = [
      [0, 'header byte', ['unsupported_version', 'wrong_kind', 'unsupported_algorithm', 'algorithm_mismatch', 'malformed']],
      [1, 'key id', ['unknown_key', 'retired_key', 'malformed']],
      [2, 'first body byte', ['authentication_failed']],
      [Math.floor(len / 2), 'middle byte', ['authentication_failed']],
      [-17, 'last body byte', ['authentication_failed']],
      [-1, 'last tag byte', ['authentication_failed']],
    ];
    for (const [pos, what, reasons] of positions) {
      await check(() => refused(`one bit flipped at byte ${pos} (${what}) of ${len}`, reasons, TOOL, { inputResponses: CONFIRM, requestState: flip(state, pos) }));
    }
    await check(() => refused('truncated by one byte', ['authentication_failed', 'malformed'], TOOL, { inputResponses: CONFIRM, requestState: Buffer.from(state, 'base64url').subarray(0, len - 1).toString('base64url') }));
    // A round's state replayed with the answers of another round is asked again, not accepted.
    await check(async () => {
      const offset = logText().length;
      const r = await call({ inputResponses: { step2: { action: 'accept', content: { color: 'red' } } }, requestState: state });
      assert.equal(r.resultType, 'input_required', `replay with another round's answers: ${JSON.stringify(r)}`);
      assert.deepEqual(Object.keys(r.inputRequests ?? {}), ['confirm'], 'asked again for confirm');
      assert.deepEqual(await newRefusals(offset).then((l) => l.length === 0 ? [] : l), [], 'asking again is not a refusal');
      console.log('  ok  round-1 state with the answers of another round (step2): asked again for confirm');
    });
    await check(async () => {
      const m1 = await call({ name: 'test_input_required_result_multi_round' });
      assert.equal(m1.resultType, 'input_required');
      const m2 = await call({ name: 'test_input_required_result_multi_round', inputResponses: { step1: { action: 'accept', content: { name: 'Ann' } } }, requestState: m1.requestState });
      assert.deepEqual(Object.keys(m2.inputRequests ?? {}), ['step2'], `multi-round round 2: ${JSON.stringify(m2)}`);
      // Round 2's state (which asked step2) replayed with round 1's answer: asked again for step2.
      const again = await call({ name: 'test_input_required_result_multi_round', inputResponses: { step1: { action: 'accept', content: { name: 'Eve' } } }, requestState: m2.requestState });
      assert.equal(again.resultType, 'input_required', `replay: ${JSON.stringify(again)}`);
      assert.deepEqual(Object.keys(again.inputRequests ?? {}), ['step2'], 'asked again for step2');
      // Round 1's state replayed with round 2's answer: asked again for step1, never completed.
      const back = await call({ name: 'test_input_required_result_multi_round', inputResponses: { step2: { action: 'accept', content: { color: 'red' } } }, requestState: m1.requestState });
      assert.equal(back.resultType, 'input_required', `replay: ${JSON.stringify(back)}`);
      assert.deepEqual(Object.keys(back.inputRequests ?? {}), ['step1'], 'asked again for step1');
      console.log('  ok  multi-round: each round\'s state replayed with the other round\'s answers is asked again');
    });
  }
  for (const mcp of clients.values()) await mcp.close().catch(() => {});
  console.log(`adversarial.mjs: ${checks} checks passed against ${url}${expiryMode ? ' (expiry)' : ''}${crossMode ? ` and ${otherUrl} (cross)` : ''}`);
}

main().catch(async (e) => {
  console.error(`adversarial.mjs: FAILED: ${e instanceof Error ? e.message : String(e)}`);
  for (const mcp of clients.values()) await mcp.close().catch(() => {});
  process.exit(1);
});
