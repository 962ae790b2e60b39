// @ts-check
// The `:authority` the client sends. On a `unix:` target it is `localhost`
// unless the caller sets `grpc.default_authority`, whatever grpc-js's
// resolver would pick: gRPC's C core (since 1.57), grpc-java and grpc-swift
// send the socket's path, which is no URI authority, and upstream h2 (hyper,
// tonic) resets such streams. The sidecar accepts them only thanks to its
// patched h2 (vendor/h2/PATCH.md); this client must not need that, nor rely
// on grpc-js's resolver choosing `localhost` (1.14.7's does). A plain HTTP/2
// server records what arrives.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import { Client, TransportError, UNIX_SOCKET_AUTHORITY, status } from '@reqstate/client';

/** @type {string[]} */
const seen = [];

/**
 * An h2c server answering every call UNIMPLEMENTED, recording its `:authority`.
 * @param {string | number} where a socket path or a loopback port (0: any)
 * @returns {Promise<http2.Http2Server>}
 */
async function recorder(where) {
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    seen.push(String(headers[':authority']));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(status.UNIMPLEMENTED), 'grpc-message': 'recorded' }, { endStream: true });
  });
  await new Promise((resolve) => (typeof where === 'number' ? server.listen(where, '127.0.0.1', () => resolve(undefined)) : server.listen(where, () => resolve(undefined))));
  return server;
}

/** @type {string} */
let dir;
/** @type {string} */
let socket;
/** @type {http2.Http2Server[]} */
const servers = [];
/** @type {number} */
let port;

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-authority-'));
  socket = path.join(dir, 'reqstate.sock');
  servers.push(await recorder(socket));
  const tcp = await recorder(0);
  servers.push(tcp);
  const address = tcp.address();
  port = typeof address === 'object' && address ? address.port : 0;
});
after(async () => {
  for (const s of servers) await new Promise((resolve) => s.close(() => resolve(undefined)));
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The authority of one listKeys call through the client.
 * @param {string} target @param {import('@reqstate/client').ClientOptions} [options]
 */
async function authorityOf(target, options) {
  const client = new Client(target, { deadlineMs: 3000, ...options });
  const before = seen.length;
  try {
    await assert.rejects(client.listKeys(), (/** @type {unknown} */ e) => e instanceof TransportError && e.code === status.UNIMPLEMENTED);
  } finally {
    client.close();
  }
  assert.equal(seen.length, before + 1);
  return seen[seen.length - 1];
}

test('a unix:// target sends localhost', async () => {
  assert.equal(UNIX_SOCKET_AUTHORITY, 'localhost');
  assert.equal(await authorityOf(`unix://${socket}`), 'localhost');
  assert.equal(await authorityOf(`unix:${socket}`), 'localhost');
});

test("the caller's grpc.default_authority wins", async () => {
  const options = { channelOptions: { 'grpc.default_authority': 'reqstate.internal' } };
  assert.equal(await authorityOf(`unix://${socket}`, options), 'reqstate.internal');
});

test('a TCP target keeps its host:port', async () => {
  assert.equal(await authorityOf(`127.0.0.1:${port}`), `127.0.0.1:${port}`);
});

// Last: it replaces grpc-js's `unix` resolver for the rest of this process.
test('localhost even when the resolver would pick another authority', async () => {
  // grpc-js's own `unix` resolver (resolver-uds.js) but for its default
  // authority: the socket's file name. (Not the percent-encoded path that
  // the C core sends: grpc-js also builds its connection URL from the
  // resolver's default authority, and that one is no URL host.)
  const { registerResolver, statusOrFromValue } = grpc.experimental;
  /** @param {import('@grpc/grpc-js').experimental.GrpcUri} target */
  const socketPath = (target) => (target.authority === '' ? `/${target.path}` : target.path);
  class PathAuthorityResolver {
    /**
     * @param {import('@grpc/grpc-js').experimental.GrpcUri} target
     * @param {import('@grpc/grpc-js').experimental.ResolverListener} listener
     */
    constructor(target, listener) {
      this.path = socketPath(target);
      this.listener = listener;
      this.returned = false;
    }
    updateResolution() {
      if (this.returned) return;
      this.returned = true;
      process.nextTick(() => this.listener(statusOrFromValue([{ addresses: [{ path: this.path }] }]), {}, null, ''));
    }
    destroy() {
      this.returned = false;
    }
    /** @param {import('@grpc/grpc-js').experimental.GrpcUri} target */
    static getDefaultAuthority(target) {
      return path.basename(socketPath(target));
    }
  }
  registerResolver('unix', PathAuthorityResolver);
  const target = `unix://${socket}`;

  // Stock grpc-js now sends the file name (the resolver is in effect) ...
  const Stock = grpc.makeGenericClientConstructor({}, 'Stock');
  const stock = new Stock(target, grpc.credentials.createInsecure());
  const before = seen.length;
  await new Promise((resolve) => {
    stock.makeUnaryRequest('/reqstate.v1.RequestState/ListKeys', () => Buffer.alloc(0), (b) => b, {}, { deadline: new Date(Date.now() + 3000) }, () => resolve(undefined));
  });
  stock.close();
  assert.deepEqual(seen.slice(before), ['reqstate.sock']);

  // ... and the client still sends localhost.
  assert.equal(await authorityOf(target), 'localhost');
});
