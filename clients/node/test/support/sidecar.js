// @ts-check
// A real `reqstate serve` process for the tests: temp-dir keyring (mode
// 0600), a Unix socket and a free loopback TCP port, readiness by polling
// grpc.health.v1.Health/Check, killed on stop. Mirrors
// tests/support/sidecar_process.rs.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, chmodSync, closeSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
export const BIN = process.env.REQSTATE_BIN || path.join(REPO, 'target/debug/reqstate');

/**
 * A 32-byte secret as base64, different per seed.
 * @param {number} seed
 */
export function secret(seed) {
  return Buffer.alloc(32, seed).toString('base64');
}

/**
 * A keyring file body from `[id, status]` pairs (XChaCha20-Poly1305 keys).
 * @param {Array<[number, string]>} keys
 */
export function keyringToml(keys) {
  let out = '# test keyring\nversion = 1\n';
  for (const [id, status] of keys) {
    out += `\n[[key]]\nid = ${id}\nstatus = "${status}"\nsecret = "${secret(id)}"\n`;
  }
  return out;
}

/** A loopback TCP port nothing listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// The standard health service, defined inline (no .proto file needed).
const healthDefinition = {
  Check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    // HealthCheckRequest { string service = 1; } with service "" is empty.
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (/** @type {Buffer} */ b) => b,
    responseSerialize: (/** @type {Buffer} */ b) => b,
    // HealthCheckResponse { ServingStatus status = 1; } SERVING = 1 => 08 01.
    responseDeserialize: (/** @type {Buffer} */ b) => ({ serving: b.length >= 2 && b[0] === 0x08 && b[1] === 0x01 }),
  },
};
const HealthClient = grpc.makeGenericClientConstructor(healthDefinition, 'Health');

/**
 * @param {string} target
 * @returns {Promise<boolean>}
 */
function healthCheck(target) {
  return new Promise((resolve) => {
    const client = new HealthClient(target, grpc.credentials.createInsecure());
    client.Check({}, { deadline: new Date(Date.now() + 500) }, (/** @type {any} */ err, /** @type {any} */ res) => {
      client.close();
      resolve(!err && res?.serving === true);
    });
  });
}

export class Sidecar {
  /**
   * @param {{ keyring?: string, authToken?: string, args?: string[] }} [options]
   * @returns {Promise<Sidecar>}
   */
  static async start(options = {}) {
    if (!existsSync(BIN)) {
      throw new Error(`no reqstate binary at ${BIN}: build it with \`cargo build --bin reqstate\` or set REQSTATE_BIN`);
    }
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-node-'));
    const keyring = path.join(dir, 'keyring.toml');
    writeFileSync(keyring, options.keyring ?? keyringToml([[1, 'primary']]), { mode: 0o600 });
    chmodSync(keyring, 0o600);
    const unix = path.join(dir, 'reqstate.sock');
    const port = await freePort();
    const args = ['serve', '--keyring', keyring, '--listen', `unix:${unix}`, '--listen', `tcp:127.0.0.1:${port}`];
    if (options.authToken !== undefined) {
      const tokenFile = path.join(dir, 'auth-token');
      writeFileSync(tokenFile, `${options.authToken}\n`, { mode: 0o600 });
      args.push('--auth-token-file', tokenFile);
    }
    args.push(...(options.args ?? []));
    const stderrPath = path.join(dir, 'stderr.log');
    const stderr = openSync(stderrPath, 'w');
    const child = spawn(BIN, args, {
      env: { ...process.env, REQSTATE_LOG: 'info' },
      stdio: ['ignore', 'ignore', stderr],
    });
    closeSync(stderr);
    const sidecar = new Sidecar(child, dir, unix, port, stderrPath);
    try {
      await sidecar.waitUntilServing(30_000);
    } catch (err) {
      await sidecar.stop();
      throw err;
    }
    return sidecar;
  }

  /**
   * @param {import('node:child_process').ChildProcess} child
   * @param {string} dir @param {string} unix @param {number} port @param {string} stderrPath
   */
  constructor(child, dir, unix, port, stderrPath) {
    this.child = child;
    this.dir = dir;
    this.unixPath = unix;
    this.port = port;
    this.stderrPath = stderrPath;
    /** @type {number | null} */
    this.exitCode = null;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? -1;
        resolve({ code, signal });
      });
    });
  }

  /** `unix:///…/reqstate.sock` */
  get unixTarget() {
    return `unix://${this.unixPath}`;
  }

  /** `127.0.0.1:PORT` */
  get tcpTarget() {
    return `127.0.0.1:${this.port}`;
  }

  log() {
    try {
      return readFileSync(this.stderrPath, 'utf8');
    } catch {
      return '';
    }
  }

  /** @param {number} timeoutMs */
  async waitUntilServing(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.exitCode !== null) throw new Error(`sidecar exited early (${this.exitCode})\n${this.log()}`);
      if (existsSync(this.unixPath) && (await healthCheck(this.unixTarget)) && (await healthCheck(this.tcpTarget))) return;
      if (Date.now() > deadline) throw new Error(`sidecar not serving in time\n${this.log()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Kills the process, waits for it, removes the temp dir. */
  async stop() {
    if (this.exitCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
