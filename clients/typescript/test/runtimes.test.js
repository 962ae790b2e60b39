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

// The primitives each runtime must use (src/primitives.ts): node:crypto where
// it is synchronous (Bun's has no chacha20-poly1305: its AEAD is pure), and
// the pure @noble path in workerd, with or without nodejs_compat.
const BACKENDS = {
  deno: { hmac: 'node:crypto', aead: 'node:crypto' },
  bun: { hmac: 'node:crypto', aead: 'pure' },
  workerd: { hmac: 'pure', aead: 'pure' },
};

function checkReport(report, runtime) {
  assert.equal(report.runtime, runtime);
  assert.deepEqual(report.backend, BACKENDS[runtime], `${runtime} took another path`);
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

const workerScript = async () => {
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
  return built.outputFiles[0].text;
};

for (const compatibilityFlags of [[], ['nodejs_compat']]) {
  test(`vector suite on workerd (miniflare)${compatibilityFlags.length ? ` with ${compatibilityFlags}` : ''}`, async () => {
    const script = await workerScript();
    // The bundle never imports a Node module (node:crypto is reached at run time, and not in workerd).
    assert.doesNotMatch(script, /\bimport\b[^;]*["']node:|\brequire\(/);
    const mf = new Miniflare({ modules: true, script, compatibilityDate: '2026-07-01', compatibilityFlags });
    try {
      const res = await mf.dispatchFetch('http://localhost/');
      const report = await res.json();
      checkReport(report, 'workerd');
      assert.match(String(report.navigator), /Cloudflare-Workers/);
    } finally {
      await mf.dispose();
    }
  });
}

test('the library has no Node-only import (dist/, without the CLI)', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const files = readdirSync(path.join(PKG, 'dist')).filter((f) => f.endsWith('.js') && f !== 'cli.js' && f !== 'statejson.js');
  assert.ok(files.includes('index.js'));
  for (const f of files) {
    const text = readFileSync(path.join(PKG, 'dist', f), 'utf8');
    assert.doesNotMatch(text, /from ['"]node:|require\(|(?<![\w-])process\.|\bBuffer\b/, f);
    // node:crypto only in primitives.js, only through getBuiltinModule, never in workerd.
    const nodeIds = text.match(/['"]node:[a-z_]+['"]/g) ?? [];
    if (f === 'primitives.js') {
      assert.deepEqual([...new Set(nodeIds)], ["'node:crypto'"], f);
      assert.match(text, /getBuiltinModule\('node:crypto'\)/);
      assert.match(text, /userAgent === 'Cloudflare-Workers'\)\s*return undefined/);
    } else assert.deepEqual(nodeIds, [], f);
  }
});
