// @ts-check
// A refused call's `reqstate-reason` trailer becomes TransportError.reason
// in the proto's spelling when it names a reason of the format
// (@reqstate/codec's REASONS), and nothing otherwise. A plain HTTP/2 server
// answers each call with the trailer the test asks for.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, TransportError, status } from '@reqstate/client';

/** @type {string | undefined} the trailer value the next answer carries */
let nextReason;
/** @type {string} */
let dir;
/** @type {http2.Http2Server} */
let server;
/** @type {Client} */
let client;

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-trailers-'));
  const socket = path.join(dir, 'sidecar.sock');
  server = http2.createServer();
  server.on('stream', (stream) => {
    /** @type {http2.OutgoingHttpHeaders} */
    const headers = { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(status.INVALID_ARGUMENT), 'grpc-message': 'refused' };
    if (nextReason !== undefined) headers['reqstate-reason'] = nextReason;
    stream.respond(headers, { endStream: true });
  });
  await new Promise((resolve) => server.listen(socket, () => resolve(undefined)));
  client = new Client(`unix://${socket}`, { deadlineMs: 3000 });
});
after(async () => {
  client?.close();
  await new Promise((resolve) => server.close(() => resolve(undefined)));
  rmSync(dir, { recursive: true, force: true });
});

for (const [trailer, reason] of /** @type {[string | undefined, string | undefined][]} */ ([
  ['invalid_argument', 'REASON_INVALID_ARGUMENT'],
  ['replay_store_unavailable', 'REASON_REPLAY_STORE_UNAVAILABLE'],
  ['REASON_EXPIRED', 'REASON_EXPIRED'],
  ['no_such_reason', undefined],
  ['', undefined],
  [undefined, undefined],
])) {
  test(`trailer ${JSON.stringify(trailer)} -> ${reason}`, async () => {
    nextReason = trailer;
    await assert.rejects(client.mint({ tool: 't', step: 's' }), (/** @type {unknown} */ e) => {
      assert.ok(e instanceof TransportError);
      assert.equal(e.code, status.INVALID_ARGUMENT);
      assert.equal(e.codeName, 'INVALID_ARGUMENT');
      assert.equal(e.details, 'refused');
      assert.equal(e.method, 'Mint');
      assert.equal(e.reason, reason);
      return true;
    });
  });
}
