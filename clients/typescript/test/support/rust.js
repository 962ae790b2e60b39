// The Rust implementation for the tests: the `reqstate` binary ($REQSTATE_BIN,
// default <repo>/target/debug/reqstate) as a CLI (local mode: the core crate
// in-process) and as a sidecar (`reqstate serve` on a Unix socket, spoken to
// with @grpc/grpc-js). A missing binary fails the tests that need it.
import { spawn, execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

export const PKG = fileURLToPath(new URL('../..', import.meta.url));
export const REPO = path.resolve(PKG, '../..');
export const BIN = process.env.REQSTATE_BIN || path.join(REPO, 'target/debug/reqstate');
export const TS_CLI = path.join(PKG, 'dist/cli.js');

export function requireBinary() {
  if (!existsSync(BIN)) throw new Error(`no reqstate binary at ${BIN}: run \`cargo build --bin reqstate\` or set REQSTATE_BIN`);
}

/** A temp dir with a keyring file (mode 0600). */
export function keyringFile(toml) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-ts-'));
  const file = path.join(dir, 'keyring.toml');
  writeFileSync(file, toml, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { dir, file, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A 32-byte secret (base64) per seed. */
export const secret = (seed) => Buffer.alloc(32, seed).toString('base64');

/** Runs a CLI (argv array), resolves { code, stdout, stderr, json }. */
export function run(argv, args, input) {
  return new Promise((resolve, reject) => {
    const child = execFile(argv[0], [...argv.slice(1), ...args], { encoding: 'utf8', maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      const code = err ? err.code : 0;
      let json;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    if (input !== undefined) child.stdin.end(input);
  });
}
export const RUST = [BIN];
export const TS = [process.execPath, TS_CLI];

const PROTO = path.join(REPO, 'proto/reqstate/v1/reqstate.proto');
const healthDefinition = {
  Check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (b) => b,
    responseSerialize: (b) => b,
    responseDeserialize: (b) => ({ serving: b.length >= 2 && b[0] === 0x08 && b[1] === 0x01 }),
  },
};
const HealthClient = grpc.makeGenericClientConstructor(healthDefinition, 'Health');

/** A real `reqstate serve` on a Unix socket with the given keyring file. */
export class Sidecar {
  static async start(keyringPath) {
    requireBinary();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reqstate-ts-sidecar-'));
    const sock = path.join(dir, 'reqstate.sock');
    const logPath = path.join(dir, 'stderr.log');
    const log = openSync(logPath, 'w');
    const child = spawn(BIN, ['serve', '--keyring', keyringPath, '--listen', `unix:${sock}`], { stdio: ['ignore', 'ignore', log], env: { ...process.env, REQSTATE_LOG: 'warn' } });
    closeSync(log);
    const s = new Sidecar(child, dir, sock, logPath);
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (s.exitCode !== null) throw new Error(`sidecar exited early (${s.exitCode}):\n${readFileSync(logPath, 'utf8')}`);
      if (existsSync(sock) && (await s.healthy())) break;
      if (Date.now() > deadline) {
        await s.stop();
        throw new Error(`sidecar not serving in time:\n${readFileSync(logPath, 'utf8')}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    const def = protoLoader.loadSync(PROTO, { keepCase: false, longs: String, enums: String, bytes: Buffer, defaults: true, oneofs: true });
    const Svc = grpc.loadPackageDefinition(def).reqstate.v1.RequestState;
    s.client = new Svc(`unix://${sock}`, grpc.credentials.createInsecure());
    return s;
  }
  constructor(child, dir, sock, logPath) {
    this.child = child;
    this.dir = dir;
    this.sock = sock;
    this.logPath = logPath;
    this.exitCode = null;
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve((this.exitCode = code ?? -1))));
  }
  healthy() {
    return new Promise((resolve) => {
      const c = new HealthClient(`unix://${this.sock}`, grpc.credentials.createInsecure());
      c.Check({}, { deadline: new Date(Date.now() + 500) }, (err, res) => {
        c.close();
        resolve(!err && res?.serving === true);
      });
    });
  }
  call(method, request) {
    return new Promise((resolve, reject) => this.client[method](request, { deadline: new Date(Date.now() + 10_000) }, (err, res) => (err ? reject(err) : resolve(res))));
  }
  async stop() {
    this.client?.close();
    if (this.exitCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
