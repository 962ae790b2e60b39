// The seed 000 whoami handler over HTTP on plain Node: two rounds, and a
// requestState that is forged, for another user, another tool or expired is
// refused with -32602 (and an answer without a verified state is not trusted).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Codec, callContext } from '@reqstate/codec';
import { createServer } from '../server.js';

const KEYS = `1:primary:${Buffer.alloc(32, 7).toString('base64')}`;
let server;
let url;
before(async () => {
  server = createServer(new Codec({ keyring: KEYS }));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${server.address().port}/mcp`;
});
after(() => new Promise((r) => server.close(r)));

let id = 0;
async function call(params, user = 'ada') {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': user }, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'whoami', arguments: {}, ...params } }) });
  return res.json();
}
const ANSWER = { username: { action: 'accept', content: { name: 'Ada' } } };

test('two rounds: asks the name, then greets', async () => {
  const r1 = await call({});
  assert.equal(r1.result.resultType, 'input_required');
  assert.equal(r1.result.inputRequests.username.params.message, 'What is your name?');
  assert.match(r1.result.requestState, /^E[A-Za-z0-9_-]+$/);
  const r2 = await call({ inputResponses: ANSWER, requestState: r1.result.requestState });
  assert.deepEqual(r2.result, { content: [{ type: 'text', text: 'Hello, Ada!' }] });
});

test('a forged, another user\'s, another tool\'s or an expired requestState is -32602', async () => {
  const r1 = await call({});
  const token = r1.result.requestState;
  const ctx = (principal) => callContext({ principal, audience: 'whoami-server', method: 'tools/call', arguments: {} });
  const now = Math.floor(Date.now() / 1000);
  const cases = {
    forged: [`${token.slice(0, 30)}${token[30] === 'A' ? 'B' : 'A'}${token.slice(31)}`, 'ada', 'authentication_failed'],
    'another user': [token, 'mallory', 'authentication_failed'],
    'another tool': [new Codec({ keyring: KEYS }).mint({ tool: 'whoareyou', step: 'username', context: ctx('ada') }).token, 'ada', 'authentication_failed'],
    expired: [new Codec({ keyring: KEYS, clock: () => now - 3600 }).mint({ tool: 'whoami', step: 'username', context: ctx('ada') }).token, 'ada', 'expired'],
    'another key': [new Codec({ keyring: `1:primary:${Buffer.alloc(32, 8).toString('base64')}` }).mint({ tool: 'whoami', step: 'username', context: ctx('ada') }).token, 'ada', 'authentication_failed'],
  };
  // Control: the same construction at the real time, right key and user, is accepted.
  const good = new Codec({ keyring: KEYS }).mint({ tool: 'whoami', step: 'username', context: ctx('ada') }).token;
  assert.deepEqual((await call({ inputResponses: ANSWER, requestState: good })).result.content[0].text, 'Hello, Ada!');
  for (const [name, [t, user, reason]] of Object.entries(cases)) {
    const r = await call({ inputResponses: ANSWER, requestState: t }, user);
    assert.equal(r.error?.code, -32602, `${name}: ${JSON.stringify(r)}`);
    assert.equal(r.error.data.reason, reason, name);
  }
});

test('an answer without requestState is not trusted: the question is asked again', async () => {
  const r = await call({ inputResponses: ANSWER });
  assert.equal(r.result.resultType, 'input_required');
});
