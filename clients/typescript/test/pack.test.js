// Installing @reqstate/codec as a user would (issue 26 item 1): a clean copy
// of the package (the files git lists: no node_modules, no dist) is packed
// with `npm pack` (its `prepare` installs the build dependencies and runs
// tsc), the tarball is installed into an empty project with only the MCP SDK
// (server + client), and the README's quick start, extracted from README.md,
// serves two rounds to the SDK client there. Then the same through a `file:`
// dependency on another clean copy (npm links it and runs `prepare` in it).
// Needs npm and the registry (or npm's cache) for the SDK packages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const SDK = ['@modelcontextprotocol/server@2.4.0', '@modelcontextprotocol/client@2.4.0', '@modelcontextprotocol/node@2.1.2'];
const npmOpts = ['--no-audit', '--no-fund', '--loglevel=error'];
const secret = Buffer.alloc(32, 3).toString('base64');

function run(cmd, args, cwd, env = {}) {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', timeout: 300_000, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The package's files as git sees them (tracked, and new ones not ignored), copied to `dest`. */
function cleanCopy(dest) {
  const files = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '.'], PKG).split('\0').filter(Boolean);
  assert.ok(files.includes('package.json') && files.includes('src/mcp.ts'), 'git lists the package');
  for (const f of files) {
    if (!existsSync(path.join(PKG, f))) continue; // deleted in the working tree
    mkdirSync(path.dirname(path.join(dest, f)), { recursive: true });
    cpSync(path.join(PKG, f), path.join(dest, f));
  }
  assert.ok(!existsSync(path.join(dest, 'node_modules')) && !existsSync(path.join(dest, 'dist')));
}

/** The README's quick start: each ```js block after a `quick-start NAME` marker, by file name. */
function quickStart() {
  const readme = readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const blocks = {};
  for (const m of readme.matchAll(/<!-- quick-start ([a-z]+\.mjs): run by test\/pack\.test\.js -->\n```js\n([\s\S]*?)\n```/g)) blocks[m[1]] = m[2];
  assert.deepEqual(Object.keys(blocks).sort(), ['http.mjs', 'server.mjs', 'stdio.mjs'], 'README.md has the three quick-start blocks');
  return blocks;
}

// Drives the quick start's entry points as a user's client would, each in its
// own process: stdio.mjs (serveStdio) launched by the SDK's StdioClientTransport
// with the SDK's default client (2025-era, answering elicitation/create), one
// that negotiates ('auto') and one pinned to 2026-07-28; http.mjs on a TCP port
// with a pinned client (ask again, complete, a tampered state refused) and the
// default client (told what to do); and a server connected to a
// StdioServerTransport by hand (2025-era only, which bind says on stderr).
const DRIVER = `
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const out = {};
const name = 'increase-counter';
const amount = { amount: { action: 'accept', content: { amount: 5 } } };
function client(negotiation, autoFulfill = true) {
  const c = new Client({ name: 'driver', version: '0' }, {
    capabilities: { elicitation: { form: {} } },
    ...(negotiation ? { versionNegotiation: { mode: negotiation } } : {}),
    inputRequired: { autoFulfill },
  });
  c.setRequestHandler('elicitation/create', async () => amount.amount);
  return c;
}
const text = (r) => (r.isError ? 'error: ' : '') + r.content.map((c) => c.text).join(' ');
const code = (p) => p.then(() => 'no error', (e) => e.code ?? e.message);

async function overStdio(script, negotiation, autoFulfill = true) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [script], env: process.env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (d) => (stderr += d));
  // All of the server's stderr, read to its end (after close() has stopped the server).
  const stderrEnded = new Promise((resolve) => transport.stderr.on('end', resolve).on('close', resolve));
  const c = client(negotiation, autoFulfill);
  const r = {};
  try {
    await c.connect(transport);
    if (autoFulfill) r.text = text(await c.callTool({ name, arguments: { current: 10 } }));
    else {
      const o = { allowInputRequired: true };
      const first = await c.callTool({ name, arguments: { current: 10 } }, o);
      r.text = text(await c.callTool({ name, arguments: { current: 10 }, requestState: first.requestState, inputResponses: amount }, o));
      // One character of the tag-covered body changed (still canonical base64url).
      const t = first.requestState;
      const tampered = t.slice(0, 30) + (t[30] === 'A' ? 'B' : 'A') + t.slice(31);
      r.tampered = await code(c.callTool({ name, arguments: { current: 10 }, requestState: tampered, inputResponses: amount }, { allowInputRequired: true }));
    }
  } catch (e) {
    r.error = e.message;
  }
  await c.close().catch(() => {});
  await Promise.race([stderrEnded, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  r.stderr = stderr;
  return r;
}

for (const [key, negotiation] of [['default', undefined], ['auto', 'auto'], ['pinned', { pin: '2026-07-28' }]]) {
  out['stdio ' + key] = await overStdio('stdio.mjs', negotiation);
}
out['stdio pinned refused'] = await overStdio('stdio.mjs', { pin: '2026-07-28' }, false);
writeFileSync('handwired.mjs', "import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';\\nimport { createServer } from './server.mjs';\\nawait createServer().connect(new StdioServerTransport());\\n");
out['handwired default'] = await overStdio('handwired.mjs', undefined);
out['handwired pinned'] = await overStdio('handwired.mjs', { pin: '2026-07-28' });

// http.mjs on a free port.
const port = await new Promise((resolve) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); }); });
const server = spawn(process.execPath, ['http.mjs'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
let serverErr = '';
server.stderr.on('data', (d) => (serverErr += d));
try {
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => { const s = net.connect(port, '127.0.0.1', () => { s.end(); resolve(true); }).on('error', () => resolve(false)); });
    if (up) break;
    if (i > 200) throw new Error('http.mjs did not listen: ' + serverErr);
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = new URL('http://127.0.0.1:' + port + '/mcp');
  const mcp = client({ pin: '2026-07-28' }, false);
  await mcp.connect(new StreamableHTTPClientTransport(url));
  const o = { allowInputRequired: true };
  const r1 = await mcp.callTool({ name, arguments: { current: 10 } }, o);
  const again = await mcp.callTool({ name, arguments: { current: 10 }, requestState: r1.requestState, inputResponses: { other: amount.amount } }, o);
  const done = await mcp.callTool({ name, arguments: { current: 10 }, requestState: r1.requestState, inputResponses: amount }, o);
  const refused = await code(mcp.callTool({ name, arguments: { current: 11 }, requestState: r1.requestState, inputResponses: amount }, o));
  await mcp.close();
  out.http = { first: r1.resultType, asked: Object.keys(r1.inputRequests), again: again.resultType, text: done.content[0].text, refused };
  const legacy = client(undefined);
  await legacy.connect(new StreamableHTTPClientTransport(url));
  out['http default'] = text(await legacy.callTool({ name, arguments: { current: 10 } }));
  await legacy.close();
  const auto = client('auto');
  await auto.connect(new StreamableHTTPClientTransport(url));
  out['http auto'] = text(await auto.callTool({ name, arguments: { current: 10 } }));
  await auto.close();
} finally {
  server.kill();
}
await new Promise((r) => (server.exitCode !== null ? r() : server.on('exit', r)));
out['http stderr'] = serverErr;
console.log(JSON.stringify(out));
`;

const DONE = 'The counter is now 15.';

function runQuickStart(project) {
  for (const [file, code] of Object.entries(quickStart())) writeFileSync(path.join(project, file), code);
  writeFileSync(path.join(project, 'driver.mjs'), DRIVER);
  // The keyring as the README makes it, through the package's own bin.
  const keys = run('npx', ['--no-install', 'reqstate-ts', 'keys', 'new'], project).trim();
  assert.match(keys, /^1:primary:xchacha20-poly1305:[A-Za-z0-9+/]{43}=$/);
  const out = JSON.parse(run(process.execPath, ['driver.mjs'], project, { REQSTATE_KEYS: keys }).trim().split('\n').pop());
  // stdio (serveStdio): every client completes the round, and nothing is said on stderr.
  for (const key of ['stdio default', 'stdio auto', 'stdio pinned']) assert.deepEqual(out[key], { text: DONE, stderr: '' }, key);
  // A tampered state: the client gets -32602, the operator one line on stderr (by default).
  const refused = out['stdio pinned refused'];
  assert.deepEqual([refused.text, refused.tampered], [DONE, -32602]);
  assert.match(refused.stderr, /^reqstate refused tools\/call "increase-counter": authentication_failed: the token does not verify for tools\/call "increase-counter" as called/m);
  assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
  // Connected by hand: a 2025-era client still completes (the SDK's legacy path), a pinned one
  // cannot connect, and bind says so with what to do.
  assert.equal(out['handwired default'].text, DONE);
  assert.match(out['handwired pinned'].error, /did not offer pinned protocol version 2026-07-28/);
  // (The pinned client's probe runs in a sibling process whose stderr the SDK discards.)
  assert.match(out['handwired default'].stderr, /^reqstate: server "counter" is connected to a StdioServerTransport by hand, which serves only 2025-era clients.*serveStdio\(createServer\)/m);
  // http.mjs: ask again, complete, refuse; the default client is told what to do, 'auto' completes.
  assert.deepEqual(out.http, { first: 'input_required', asked: ['amount'], again: 'input_required', text: DONE, refused: -32602 });
  assert.match(out['http default'], /^error: This call needs input from the client .*versionNegotiation: \{ mode: 'auto' \}/);
  assert.equal(out['http auto'], DONE);
  assert.match(out['http stderr'], /^reqstate refused tools\/call "increase-counter": authentication_failed: /m);
  assert.match(out['http stderr'], /^reqstate could not ask for input in tools\/call "increase-counter": this client connected with a 2025-era protocol/m);
}

function emptyProject(dir) {
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'empty', version: '1.0.0', private: true, type: 'module' }));
  return dir;
}

test('npm pack of a clean copy installs into an empty project with only the SDK and runs the README quick start', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'reqstate-pack-'));
  try {
    const copy = path.join(tmp, 'codec');
    cleanCopy(copy);
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', tmp, ...npmOpts], copy));
    const files = packed.files.map((f) => f.path).sort();
    for (const f of ['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/mcp.js', 'dist/cli.js', 'dist/redis.js']) assert.ok(files.includes(f), `${f} is packed`);
    assert.deepEqual(files.filter((f) => !/^dist\/[a-z]+\.(js|d\.ts)$/.test(f) && f !== 'README.md' && f !== 'package.json' && f !== 'LICENSE'), [], 'nothing but dist/, the README and package.json');
    const project = emptyProject(path.join(tmp, 'project'));
    run('npm', ['install', ...npmOpts, path.join(tmp, packed.filename), ...SDK], project);
    // Only the package's own runtime dependencies came with it.
    for (const dev of ['typescript', '@types/node', 'redis']) assert.ok(!existsSync(path.join(project, 'node_modules', dev)), `${dev} is not installed`);
    for (const dep of ['@noble/ciphers', '@noble/hashes', 'smol-toml']) assert.ok(existsSync(path.join(project, 'node_modules', dep)), `${dep} is installed`);
    runQuickStart(project);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('a file: dependency on a clean copy builds itself (prepare) and runs the README quick start', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'reqstate-file-'));
  try {
    const copy = path.join(tmp, 'codec');
    cleanCopy(copy);
    const project = emptyProject(path.join(tmp, 'project'));
    run('npm', ['install', ...npmOpts, `file:${copy}`, ...SDK], project);
    assert.ok(existsSync(path.join(copy, 'dist/index.js')), 'prepare built dist/ in the linked folder');
    runQuickStart(project);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
