// A real redis-server for the tests, started in a temp dir on a Unix socket
// and, when asked, on a free TCP port of 127.0.0.1 (the command line takes
// redis:// URLs). No persistence. A missing redis-server fails the test that
// starts one (scripts/test.sh installs the Debian package).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** A TCP port of 127.0.0.1 that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export class RedisServer {
  /**
   * @param {string} dir a temp dir (the socket, and nothing else: no persistence)
   * @param {{ tcp?: boolean, requirepass?: string }} [options]
   */
  static async start(dir, options = {}) {
    const socket = path.join(dir, 'redis.sock');
    const port = options.tcp ? await freePort() : 0;
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--unixsocket', socket, '--unixsocketperm', '700', '--save', '', '--appendonly', 'no', '--dir', dir];
    if (options.requirepass !== undefined) args.push('--requirepass', options.requirepass);
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    const exited = new Promise((r) => child.once('exit', r));
    for (let i = 0; i < 200 && !(existsSync(socket) && (!options.tcp || log.includes('Ready to accept'))); i++) {
      if (child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    if (!existsSync(socket)) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start:\n${log}`);
    }
    const s = new RedisServer();
    Object.assign(s, { child, socket, exited, dir, port, password: options.requirepass, log: () => log });
    return s;
  }
  /** `redis://127.0.0.1:<port>` (started with `tcp: true`). */
  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }
  cli(...args) {
    const auth = this.password === undefined ? [] : ['--no-auth-warning', '-a', this.password];
    return execFileSync('redis-cli', ['-s', this.socket, ...auth, ...args], { encoding: 'utf8' }).trim();
  }
  async stop() {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}
