// The vector suite (test/suite.js) on Deno, Bun and workerd, each from its
// npm package (test/node_modules/.bin/deno, test/node_modules/.bin/bun, miniflare's
// workerd). A runtime that is missing or does not start fails its test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { Miniflare } from 'miniflare';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const bin = (name) => path.join(PKG, 'test/node_modules/.bin', name);
const env = { ...process.env, DENO_DIR: path.join(PKG, '.cache/deno'), DENO_NO_UPDATE_CHECK: '1', BUN_INSTALL_CACHE_DIR: path.join(PKG, '.cache/bun'), NO_COLOR: '1' };

function checkReport(report, runtime) {
  assert.equal(report.runtime, runtime);
  assert.deepEqual(report.failures, []);
  assert.ok(report.passed > 300, `only ${report.passed} checks ran`);
  assert.equal(report.passed, report.expected);
}

for (const [runtime, argv] of [
  ['deno', [bin('deno'), 'run', '--allow-read', '--no-prompt', 'test/runtimes/driver.js']],
  ['bun', [bin('bun'), 'test/runtimes/driver.js']],
]) {
  test(`vector suite on ${runtime}`, () => {
    const out = execFileSync(argv[0], argv.slice(1), { cwd: PKG, env, encoding: 'utf8', timeout: 120_000 });
    const report = JSON.parse(out.trim().split('\n').pop());
    checkReport(report, runtime);
  });
}

test('vector suite on workerd (miniflare)', async () => {
  const built = await esbuild.build({
    entryPoints: [path.join(PKG, 'test/runtimes/worker.js')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    loader: { '.json': 'text' },
    write: false,
    logLevel: 'silent',
  });
  const mf = new Miniflare({ modules: true, script: built.outputFiles[0].text, compatibilityDate: '2026-07-01' });
  try {
    const res = await mf.dispatchFetch('http://localhost/');
    const report = await res.json();
    checkReport(report, 'workerd');
    assert.match(String(report.navigator), /Cloudflare-Workers/);
  } finally {
    await mf.dispose();
  }
});

test('the library has no Node-only import (dist/, without the CLI)', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const files = readdirSync(path.join(PKG, 'dist')).filter((f) => f.endsWith('.js') && f !== 'cli.js' && f !== 'statejson.js');
  assert.ok(files.includes('index.js'));
  for (const f of files) {
    const text = readFileSync(path.join(PKG, 'dist', f), 'utf8');
    assert.doesNotMatch(text, /from ['"]node:|require\(|(?<![\w-])process\.|\bBuffer\b/, f);
  }
});
