// Stock @grpc/grpc-js against the real sidecar over its Unix socket: no
// reqstate package, no channel options, the service loaded from proto/ by
// @grpc/proto-loader as a new user would. Run by tests/stock_clients/run.sh;
// the binary is $REQSTATE_BIN.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..');
const binary = process.env.REQSTATE_BIN ?? join(repo, 'target', 'debug', 'reqstate');

const loaded = grpc.loadPackageDefinition(
  protoLoader.loadSync(
    [
      join(repo, 'proto', 'reqstate', 'v1', 'reqstate.proto'),
      join(here, 'node_modules', 'grpc-health-check', 'proto', 'health', 'v1', 'health.proto'),
    ],
    { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true },
  ),
);
const RequestState = loaded.reqstate.v1.RequestState;
const Health = loaded.grpc.health.v1.Health;

let dir;
let sidecar;
let target;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'reqstate-grpc-js-'));
  const socket = join(dir, 'reqstate.sock');
  sidecar = spawn(binary, ['serve', '--dev', '--listen', `unix:${socket}`], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  while (!existsSync(socket)) {
    assert.equal(sidecar.exitCode, null, 'the sidecar exited at start');
    assert.ok(Date.now() < deadline, 'the sidecar did not bind its socket');
    await sleep(50);
  }
  target = `unix://${socket}`;
});

after(async () => {
  sidecar.kill('SIGTERM');
  await new Promise((done) => sidecar.once('exit', done));
  rmSync(dir, { recursive: true, force: true });
});

/** Calls a unary method and resolves with [error, response, trailers]. */
function call(client, method, request) {
  return new Promise((done) => {
    let trailers;
    const deadline = new Date(Date.now() + 5000);
    const c = client[method](request, { deadline }, (error, response) => done([error, response, trailers]));
    c.on('status', (status) => {
      trailers = status.metadata;
    });
  });
}

test('unary Mint and Verify over the socket with no options', async () => {
  const client = new RequestState(target, grpc.credentials.createInsecure());
  try {
    const [mintError, minted] = await call(client, 'Mint', {
      tool: 'increase-counter',
      step: 'confirm',
      state_json: '{"n":2}',
      ttl_seconds: 60,
      context: Buffer.from('ctx'),
    });
    assert.equal(mintError, null);
    assert.ok(minted.token.length > 0);
    const [verifyError, verified] = await call(client, 'Verify', {
      token: minted.token,
      tool: 'increase-counter',
      expected_step: 'confirm',
      context: Buffer.from('ctx'),
    });
    assert.equal(verifyError, null);
    assert.equal(verified.valid, true, verified.detail);
    assert.equal(verified.state_json, '{"n":2}');
    const [, wrongTool] = await call(client, 'Verify', { token: minted.token, tool: 'other', context: Buffer.from('ctx') });
    assert.equal(wrongTool.valid, false);
    assert.equal(wrongTool.reason, 'REASON_AUTHENTICATION_FAILED');
  } finally {
    client.close();
  }
});

test('batch Mint and Verify over the socket', async () => {
  const client = new RequestState(target, grpc.credentials.createInsecure());
  try {
    const items = Array.from({ length: 8 }, (_, i) => ({ tool: 't', step: `s${i}`, state_json: String(i), ttl_seconds: 60 }));
    const [mintError, minted] = await call(client, 'MintBatch', { items });
    assert.equal(mintError, null);
    const tokens = minted.results.map((r) => r.minted.token);
    assert.equal(tokens.length, 8);
    const [verifyError, verified] = await call(client, 'VerifyBatch', {
      items: tokens.map((token, i) => ({ token, tool: 't', expected_step: `s${i}` })),
    });
    assert.equal(verifyError, null);
    assert.deepEqual(verified.results.map((r) => r.state_json), items.map((i) => i.state_json));
  } finally {
    client.close();
  }
});

test('health Check over the socket', async () => {
  const client = new Health(target, grpc.credentials.createInsecure());
  try {
    for (const service of ['', 'reqstate.v1.RequestState']) {
      const [error, answer] = await call(client, 'Check', { service });
      assert.equal(error, null);
      assert.equal(answer.status, 'SERVING');
    }
  } finally {
    client.close();
  }
});

test('an error carries the rich error details and the reason trailer', async () => {
  const client = new RequestState(target, grpc.credentials.createInsecure());
  try {
    const [error] = await call(client, 'Mint', { tool: '', step: 's', ttl_seconds: 60 });
    assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(error.metadata.get('reqstate-reason'), ['invalid_argument']);
    const [details] = error.metadata.get('grpc-status-details-bin');
    assert.ok(Buffer.isBuffer(details) && details.length > 0, 'no grpc-status-details-bin');
    // google.rpc.Status { code = 3, ... details = [Any(ErrorInfo)] }: the
    // type URL and the reason are in the bytes as they are.
    const text = details.toString('latin1');
    assert.ok(text.includes('type.googleapis.com/google.rpc.ErrorInfo'), 'no ErrorInfo detail');
    assert.ok(text.includes('INVALID_ARGUMENT') && text.includes('reqstate'));
  } finally {
    client.close();
  }
});
