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
const SDK = ['@modelcontextprotocol/server@2.4.0', '@modelcontextprotocol/client@2.4.0'];
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

/** The README's quick start: the ```js block after the quick-start marker. */
function quickStart() {
  const readme = readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const m = readme.match(/<!-- quick-start: run by test\/pack\.test\.js -->\n```js\n([\s\S]*?)\n```/);
  assert.ok(m, 'README.md has the quick-start block');
  return m[1];
}

// Drives the quick start's handler with the SDK client, in process (Fetch API).
const DRIVER = `
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { handler } from './quickstart.mjs';
const fetch = (url, init) => handler.fetch(new Request(url, init));
const mcp = new Client({ name: 'driver', version: '0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } });
await mcp.connect(new StreamableHTTPClientTransport(new URL('http://quickstart/mcp'), { fetch }));
const o = { allowInputRequired: true };
const name = 'increase-counter';
const amount = { amount: { action: 'accept', content: { amount: 5 } } };
const r1 = await mcp.callTool({ name, arguments: { current: 10 } }, o);
const again = await mcp.callTool({ name, arguments: { current: 10 }, requestState: r1.requestState, inputResponses: { other: amount.amount } }, o);
const done = await mcp.callTool({ name, arguments: { current: 10 }, requestState: r1.requestState, inputResponses: amount }, o);
let refused;
try {
  await mcp.callTool({ name, arguments: { current: 11 }, requestState: r1.requestState, inputResponses: amount }, o);
} catch (e) {
  refused = e.code;
}
console.log(JSON.stringify({ first: r1.resultType, asked: Object.keys(r1.inputRequests), again: again.resultType, text: done.content[0].text, refused }));
await mcp.close();
`;

function runQuickStart(project) {
  writeFileSync(path.join(project, 'quickstart.mjs'), quickStart());
  writeFileSync(path.join(project, 'driver.mjs'), DRIVER);
  const out = run(process.execPath, ['driver.mjs'], project, { REQSTATE_KEYS: `1:primary:${secret}` });
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), {
    first: 'input_required',
    asked: ['amount'],
    again: 'input_required',
    text: 'The counter is now 15.',
    refused: -32602,
  });
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
