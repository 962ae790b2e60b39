// @ts-check
// The packages as a user gets them: `npm pack` of @reqstate/codec and of this
// package, both tarballs installed into an empty project outside the
// repository (whose .npmrc sends @reqstate/* to no registry, so they can only
// come from the tarballs), then, from that project: every module resolves
// inside it, the published types check, the call context matches the corpus,
// and a call goes through the client to a real sidecar.
// run-tests.sh builds both packages' dist/ before the tests, so the packs
// run with --ignore-scripts (this package's prepack would rebuild dist/ under
// the other test files' feet).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { REPO, Sidecar } from './support/sidecar.js';

const run = promisify(execFile);
const NODE_CLIENT = fileURLToPath(new URL('..', import.meta.url));
const CODEC = path.join(REPO, 'clients/typescript');
const TSC = path.join(NODE_CLIENT, 'node_modules/typescript/bin/tsc');
/** The environment of the user's project: nothing pointing into the repository. */
const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), npm_config_cache: process.env.npm_config_cache ?? path.join(os.homedir(), '.npm') };

/** @type {string} */
let tmp;
/** @type {string} */
let app;
/** @type {Record<string, { filename: string, files: string[] }>} */
const packed = {};
/** @type {Sidecar} */
let sidecar;

/**
 * `npm pack` of the package in `dir` into tmp; its tarball's name and files.
 * @param {string} dir
 */
async function pack(dir) {
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: dir, env: { ...process.env }, timeout: 120_000 });
  const [info] = JSON.parse(stdout);
  return { filename: /** @type {string} */ (info.filename), files: info.files.map((/** @type {{ path: string }} */ f) => f.path) };
}

const MAIN = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { realpathSync } from 'node:fs';
import { Client, InvalidArgumentsError, callContext } from '@reqstate/client';

const fromClient = createRequire(realpathSync('node_modules/@reqstate/client/package.json'));
const resolved = {
  '@reqstate/client': import.meta.resolve('@reqstate/client'),
  '@reqstate/codec': fromClient.resolve('@reqstate/codec'),
  '@grpc/grpc-js': fromClient.resolve('@grpc/grpc-js'),
};

const corpus = JSON.parse(readFileSync('call_context.json', 'utf8'));
let matched = 0, refused = 0;
for (const c of corpus.cases) {
  const parts = { principal: c.principal, audience: c.audience, method: c.method, argumentsJson: c.arguments_json };
  if (c.refused) {
    try { callContext(parts); } catch (e) { if (e instanceof InvalidArgumentsError && e.rule === c.reason) refused++; }
  } else if (Buffer.from(callContext(parts)).toString('hex') === c.context) matched++;
}

const client = new Client(process.env.REQSTATE_TARGET, { deadlineMs: 5000 });
const context = callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', argumentsJson: '{"current":10}' });
const { token } = await client.mint({ tool: 'increase-counter', step: 'confirm', stateJson: '{"current":10}', context });
const verified = await client.verify({ token, tool: 'increase-counter', expectedStep: 'confirm', context });
const other = callContext({ principal: 'user-43', audience: 'counter-server', method: 'tools/call', argumentsJson: '{"current":10}' });
const refusedCall = await client.verify({ token, tool: 'increase-counter', context: other });
client.close();
console.log(JSON.stringify({ resolved, cases: corpus.cases.length, matched, refused, verified, refusedCall }));
`;

const CHECK = `
import { Client, callContext, type Reason, type VerifyResult } from '@reqstate/client';
const client: Client = new Client('unix:///run/reqstate/reqstate.sock');
const context: Uint8Array = callContext({ principal: 'p', audience: 'a', method: 'tools/call', arguments: { n: 1 } });
export async function check(token: string): Promise<Reason | string> {
  const result: VerifyResult = await client.verify({ token, tool: 't', context });
  return result.valid ? result.step : result.reason;
}
`;

before(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'reqstate-pack-'));
  packed.codec = await pack(CODEC);
  packed.client = await pack(NODE_CLIENT);
  app = path.join(tmp, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
  writeFileSync(path.join(app, '.npmrc'), '@reqstate:registry=https://registry.invalid/\n');
  // The codec first, then the client: its dependency on @reqstate/codec
  // 0.1.0 is then already met, and npm does not ask a registry about it.
  const install = (/** @type {string[]} */ specs) =>
    run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...specs], { cwd: app, env, timeout: 300_000 });
  await install([`../${path.basename(packed.codec.filename)}`, '@types/node@20.19.43']);
  await install([`../${path.basename(packed.client.filename)}`]);
  copyFileSync(path.join(REPO, 'tests/vectors/call_context.json'), path.join(app, 'call_context.json'));
  writeFileSync(path.join(app, 'main.js'), MAIN);
  writeFileSync(path.join(app, 'check.ts'), CHECK);
  writeFileSync(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2023', module: 'NodeNext', moduleResolution: 'NodeNext', types: ['node'], strict: true, noEmit: true, skipLibCheck: false }, include: ['check.ts'] }),
  );
  sidecar = await Sidecar.start();
});
after(async () => {
  await sidecar?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('the tarballs hold the built package, not the sources', () => {
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/callcontext.js', 'package.json']) assert.ok(packed.codec.files.includes(f), `codec: ${f}`);
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/client.js', 'dist/types.d.ts', 'proto/reqstate/v1/reqstate.proto', 'README.md', 'package.json']) {
    assert.ok(packed.client.files.includes(f), `client: ${f}`);
  }
  assert.deepEqual(packed.client.files.filter((f) => !/^(dist\/|proto\/|README\.md$|package\.json$)/.test(f)), []);
});

test('the installed client depends on @reqstate/codec by version, and got the tarball', () => {
  const manifest = JSON.parse(readFileSync(path.join(app, 'node_modules/@reqstate/client/package.json'), 'utf8'));
  assert.equal(manifest.dependencies['@reqstate/codec'], '0.1.0');
  assert.equal(manifest.dependencies.canonicalize, undefined);
  const lock = JSON.parse(readFileSync(path.join(app, 'package-lock.json'), 'utf8'));
  assert.equal(lock.packages['node_modules/@reqstate/codec'].resolved, `file:../${path.basename(packed.codec.filename)}`);
  assert.equal(lock.packages['node_modules/@reqstate/client'].resolved, `file:../${path.basename(packed.client.filename)}`);
  // One codec: the client's dependency is the top-level one.
  assert.equal(Object.keys(lock.packages).filter((p) => p.endsWith('node_modules/@reqstate/codec')).length, 1);
});

test('the published types check in the project (tsc, skipLibCheck off)', async () => {
  await run(process.execPath, [TSC, '-p', '.'], { cwd: app, env, timeout: 120_000 });
});

test('from the project: modules resolve inside it, the corpus matches, a call goes through', async () => {
  const { stdout } = await run(process.execPath, ['main.js'], { cwd: app, env: { ...env, REQSTATE_TARGET: sidecar.unixTarget }, timeout: 60_000 });
  const out = JSON.parse(stdout);
  for (const [name, where] of Object.entries(out.resolved)) {
    const file = where.startsWith('file:') ? fileURLToPath(where) : where;
    assert.ok(file.startsWith(path.join(app, 'node_modules') + path.sep), `${name} resolved to ${file}`);
    assert.ok(!file.startsWith(REPO + path.sep), `${name} resolved into the repository: ${file}`);
  }
  assert.ok(out.cases >= 40);
  assert.equal(out.matched + out.refused, out.cases);
  assert.ok(out.matched > 0 && out.refused > 0);
  assert.equal(out.verified.valid, true);
  assert.equal(out.verified.stateJson, '{"current":10}');
  assert.deepEqual({ valid: out.refusedCall.valid, reason: out.refusedCall.reason }, { valid: false, reason: 'REASON_AUTHENTICATION_FAILED' });
});
