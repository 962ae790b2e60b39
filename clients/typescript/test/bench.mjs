// Figures for docs/BENCHMARKS.md, "TypeScript (@reqstate/codec)":
//   node test/bench.mjs             (after ./build.sh and `npm ci` in test/, as run-tests.sh does)
// - mint and verify per operation on Node, both algorithms, next to the MCP
//   SDK v2's own createRequestStateCodec (HMAC, WebCrypto), same claims
//   (benches/data/reference-claims.json), median of rounds;
// - the token size of each for those claims;
// - the package's minified + gzipped size (esbuild, everything the library imports);
// - cold start in workerd (miniflare): a worker importing the package and
//   minting once, against an empty worker, fresh runtime each time.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { Miniflare } from 'miniflare';
import { createRequestStateCodec as sdkCodec } from '@modelcontextprotocol/server';
import { Codec, createRequestStateCodec } from '../dist/index.js';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const claims = JSON.parse(readFileSync(path.join(PKG, '../../benches/data/reference-claims.json'), 'utf8'));
const { tool, step, state } = claims;
const context = new TextEncoder().encode(claims.context);
const secret = Buffer.alloc(32, 0x42).toString('base64');
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const N = Number(process.env.N ?? 20000);

// Every (implementation, operation) is measured once per round, round-robin,
// so that load that varies during the run (a shared machine) hits all alike;
// the figure is the median over the rounds.
const cases = [];
function add(name, op, fn, isAsync) {
  cases.push({ name, op, fn, isAsync, per: [] });
}
for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
  const codec = new Codec({ keyring: `1:primary:${algorithm}:${secret}` });
  const token = codec.mint({ tool, step, state, ttl: 600, context }).token;
  const name = `@reqstate/codec ${algorithm} (Codec, sync)`;
  add(name, 'mint', () => codec.mint({ tool, step, state, ttl: 600, context }), false);
  add(name, 'verify', () => codec.verify(token, { tool, context, expectedStep: step }), false);
  cases.find((c) => c.name === name).chars = token.length;
}
// The SDK drop-in, awaited like the SDK codec: same payload, tool and context bound.
const ctx = { mcpReq: { method: 'tools/call' }, http: { authInfo: { clientId: 'user-42' } } };
const payload = { step, ...state };
for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
  const c = createRequestStateCodec({ keyring: `1:primary:${algorithm}:${secret}`, call: { tool, arguments: { current: 10 } }, audience: 'counter-server', ttlSeconds: 600 });
  const token = await c.mint(payload, ctx);
  const name = `@reqstate/codec ${algorithm} (SDK drop-in, async, with callContext)`;
  add(name, 'mint', () => c.mint(payload, ctx), true);
  add(name, 'verify', () => c.verify(token, ctx), true);
  cases.find((x) => x.name === name).chars = token.length;
}
{
  const c = sdkCodec({ key: Buffer.alloc(32, 0x42), ttlSeconds: 600, bind: () => `${tool}\0${claims.context}` });
  const token = await c.mint(payload, ctx);
  const name = 'MCP SDK 2.4.0 createRequestStateCodec (HMAC-SHA256, WebCrypto, bind)';
  add(name, 'mint', () => c.mint(payload, ctx), true);
  add(name, 'verify', () => c.verify(token, ctx), true);
  cases.find((x) => x.name === name).chars = token.length;
  cases.find((x) => x.name === name).unbound = (await sdkCodec({ key: Buffer.alloc(32, 0x42), ttlSeconds: 600 }).mint(payload)).length;
}
async function once(c, n) {
  const t = process.hrtime.bigint();
  if (c.isAsync) for (let i = 0; i < n; i++) await c.fn();
  else for (let i = 0; i < n; i++) c.fn();
  return Number(process.hrtime.bigint() - t) / n;
}
for (const c of cases) await once(c, 2000); // warm up
for (let r = 0; r < ROUNDS; r++) for (const c of cases) c.per.push(await once(c, N));
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const rows = [];
for (const c of cases) {
  if (c.op !== 'mint') continue;
  const v = cases.find((x) => x.name === c.name && x.op === 'verify');
  rows.push({ name: c.name, mint: med(c.per), verify: med(v.per), chars: c.chars, unbound: c.unbound });
}

// Package size: everything `import '@reqstate/codec'` pulls in, minified, gzipped.
const built = await esbuild.build({ entryPoints: [path.join(PKG, 'dist/index.js')], bundle: true, minify: true, format: 'esm', platform: 'neutral', write: false, metafile: true, logLevel: 'silent' });
const bundle = built.outputFiles[0].contents;
const byPackage = {};
for (const [file, info] of Object.entries(built.metafile.outputs[Object.keys(built.metafile.outputs)[0]].inputs)) {
  const m = file.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  const k = m ? m[1] : '@reqstate/codec (own code)';
  byPackage[k] = (byPackage[k] ?? 0) + info.bytesInOutput;
}

// Cold start in workerd: fresh miniflare per sample; the time to the first response.
const workerBundle = (
  await esbuild.build({
    stdin: { contents: `import { Codec } from './dist/index.js';\nexport default { async fetch(req, env) { const c = new Codec({ keyring: env.KEYS }); return new Response(c.mint({ tool: 't', step: 's', state: { a: 1 } }).token); } };`, resolveDir: PKG, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    minify: true,
    write: false,
    logLevel: 'silent',
  })
).outputFiles[0].text;
const emptyWorker = `export default { async fetch() { return new Response('ok'); } };`;
async function coldStart(script) {
  const t = performance.now();
  const mf = new Miniflare({ modules: true, script, compatibilityDate: '2026-07-01', bindings: { KEYS: `1:primary:${secret}` } });
  const res = await mf.dispatchFetch('http://localhost/');
  await res.text();
  const ms = performance.now() - t;
  await mf.dispose();
  return ms;
}
const samples = { codec: [], empty: [] };
for (let i = 0; i < 5; i++) {
  samples.empty.push(await coldStart(emptyWorker));
  samples.codec.push(await coldStart(workerBundle));
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

const f = (x) => Math.round(x).toLocaleString('en-US');
console.log(`node ${process.version}, ${os.cpus().length} x ${os.cpus()[0].model}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, ${ROUNDS} rounds x ${N} calls each, round-robin, median ns/op\n`);
console.log('| implementation | mint ns | verify ns | round trip ns | token chars |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${f(r.mint)} | ${f(r.verify)} | ${f(r.mint + r.verify)} | ${r.chars} |`);
const sdk = rows[rows.length - 1];
const x = rows[1];
const xd = rows[3];
console.log(`\nXChaCha round trip / SDK HMAC round trip: Codec ${((x.mint + x.verify) / (sdk.mint + sdk.verify)).toFixed(2)}x, drop-in ${((xd.mint + xd.verify) / (sdk.mint + sdk.verify)).toFixed(2)}x (target <= 1)`);
console.log(`token chars: XChaCha ${x.chars} vs SDK ${sdk.chars}: ${((1 - x.chars / sdk.chars) * 100).toFixed(1)}% shorter (target >= 40%; ${Math.floor(sdk.chars * 0.6)} chars or fewer); HMAC ${rows[0].chars}: ${((1 - rows[0].chars / sdk.chars) * 100).toFixed(1)}% shorter; SDK without bind: ${sdk.unbound}`);
console.log(`\npackage, minified: ${bundle.length} bytes; minified + gzipped: ${gzipSync(bundle, { level: 9 }).length} bytes`);
for (const [k, v] of Object.entries(byPackage).sort((a, b) => b[1] - a[1])) console.log(`  ${k}: ${v} bytes minified`);
console.log(`\nworkerd cold start (fresh miniflare, to the first response; median of 5): empty worker ${f(median(samples.empty))} ms, importing @reqstate/codec + parsing the keyring + one mint ${f(median(samples.codec))} ms; difference ${f(median(samples.codec) - median(samples.empty))} ms`);
