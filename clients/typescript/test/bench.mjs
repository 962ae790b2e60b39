// Figures for docs/BENCHMARKS.md, "TypeScript (@reqstate/codec)", in one run:
//   node test/bench.mjs             (after ./build.sh and `npm ci` in test/, as run-tests.sh does)
// - mint and verify per operation on Node, both algorithms, next to the MCP
//   SDK v2's own createRequestStateCodec (HMAC, WebCrypto), same claims
//   (benches/data/reference-claims.json), median of rounds, round-robin;
// - the Rust core's round trip for the same claims, from the same run:
//   `cargo bench -p reqstate-benches --bench tokens` (its summary table only;
//   CARGO_TARGET_DIR is honoured), run before the Node measurements and again
//   after them, the lower of the two kept (RUST_BENCH=0 skips it);
// - the ratios the targets are stated in (HMAC round trip <= 5x the Rust
//   core's, >= 5x faster than the SDK's codec);
// - which primitives the package took (cryptoBackend());
// - the token size of each for those claims;
// - the package's minified + gzipped size (esbuild), for the main entry and
//   for @reqstate/codec/compact (no TOML parser);
// - cold start in workerd (miniflare): a Worker importing the package (either
//   entry) and minting once, against an empty Worker, a fresh runtime per
//   sample, round-robin, median of COLD (default 11) samples.
// REQSTATE_CODEC_DIST=/path/to/another/dist measures another build of the
// package with the same script; REQSTATE_CODEC_BEFORE=/path/to/an/older/dist
// adds that build's Codec rows, bundle sizes and cold start to the same run,
// round-robin with the rest (a before/after comparison under the same load).
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { Miniflare } from 'miniflare';
import { createRequestStateCodec as sdkCodec } from '@modelcontextprotocol/server';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const REPO = path.join(PKG, '../..');
const DIST = path.resolve(process.env.REQSTATE_CODEC_DIST ?? path.join(PKG, 'dist'));
const lib = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
const BEFORE = process.env.REQSTATE_CODEC_BEFORE ? path.resolve(process.env.REQSTATE_CODEC_BEFORE) : undefined;
const before = BEFORE && (await import(pathToFileURL(path.join(BEFORE, 'index.js')).href));
const { Codec, createRequestStateCodec } = lib;
const claims = JSON.parse(readFileSync(path.join(REPO, 'benches/data/reference-claims.json'), 'utf8'));
const { tool, step, state } = claims;
const context = new TextEncoder().encode(claims.context);
const secret = Buffer.alloc(32, 0x42).toString('base64');
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const N = Number(process.env.N ?? 20000);
const COLD = Number(process.env.COLD ?? 11);
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const loadBefore = load();

// The Rust core, same claims: the summary table of benches/tokens.rs (no criterion runs: the filter matches none).
function rustRoundTrips() {
  if (process.env.RUST_BENCH === '0') return undefined;
  const out = execFileSync('cargo', ['bench', '-q', '-p', 'reqstate-benches', '--bench', 'tokens', '--', 'summary-table-only'], { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 24 });
  const row = (name) => {
    const line = out.split('\n').find((l) => l.startsWith(`| ${name} |`));
    if (!line) throw new Error(`bench.mjs: no "${name}" row in the output of cargo bench`);
    const [mint, verify] = line.split('|').slice(2, 4).map((x) => Number(x.trim()));
    return { mint, verify, roundTrip: mint + verify };
  };
  return { hmac: row('reqstate hmac-sha256'), xchacha: row('reqstate xchacha20-poly1305') };
}
const rustBefore = rustRoundTrips();

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
if (before) {
  for (const algorithm of ['hmac-sha256', 'xchacha20-poly1305']) {
    const codec = new before.Codec({ keyring: `1:primary:${algorithm}:${secret}` });
    const token = codec.mint({ tool, step, state, ttl: 600, context }).token;
    const name = `BEFORE: @reqstate/codec ${algorithm} (Codec, sync; ${BEFORE})`;
    add(name, 'mint', () => codec.mint({ tool, step, state, ttl: 600, context }), false);
    add(name, 'verify', () => codec.verify(token, { tool, context, expectedStep: step }), false);
    cases.find((c) => c.name === name).chars = token.length;
  }
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
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const rows = [];
for (const c of cases) {
  if (c.op !== 'mint') continue;
  const v = cases.find((x) => x.name === c.name && x.op === 'verify');
  rows.push({ name: c.name, mint: median(c.per), verify: median(v.per), chars: c.chars, unbound: c.unbound });
}
const loadAfterNode = load();
const rustAfter = rustRoundTrips();
const rust = rustBefore && {
  hmac: rustAfter.hmac.roundTrip < rustBefore.hmac.roundTrip ? rustAfter.hmac : rustBefore.hmac,
  xchacha: rustAfter.xchacha.roundTrip < rustBefore.xchacha.roundTrip ? rustAfter.xchacha : rustBefore.xchacha,
};

// Package size: everything an entry pulls in, minified, gzipped.
const entries = [
  ['@reqstate/codec', 'index.js', DIST],
  ['@reqstate/codec/compact', 'compact.js', DIST],
  ...(BEFORE ? [['BEFORE: @reqstate/codec', 'index.js', BEFORE]] : []),
].filter(([, f, dir]) => existsSync(path.join(dir, f)));
const sizes = [];
for (const [label, file, dir] of entries) {
  for (const [what, contents] of [
    ['everything', `export * from './${file}';`],
    ['Codec only', `export { Codec } from './${file}';`],
  ]) {
    const built = await esbuild.build({ stdin: { contents, resolveDir: dir, loader: 'js' }, bundle: true, minify: true, format: 'esm', platform: 'neutral', write: false, metafile: true, logLevel: 'silent' });
    const bytes = built.outputFiles[0].contents;
    const byPackage = {};
    for (const [f, info] of Object.entries(built.metafile.outputs[Object.keys(built.metafile.outputs)[0]].inputs)) {
      const m = f.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
      const k = m ? m[1] : '@reqstate/codec (own code)';
      byPackage[k] = (byPackage[k] ?? 0) + info.bytesInOutput;
    }
    sizes.push({ label, what, min: bytes.length, gz: gzipSync(bytes, { level: 9 }).length, byPackage });
  }
}

// Cold start in workerd: a fresh miniflare per sample; the time to the first response.
const workerOf = async (file, dir) =>
  (
    await esbuild.build({
      stdin: { contents: `import { Codec } from './${file}';\nexport default { async fetch(req, env) { const c = new Codec({ keyring: env.KEYS }); return new Response(c.mint({ tool: 't', step: 's', state: { a: 1 } }).token); } };`, resolveDir: dir, loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      minify: true,
      write: false,
      logLevel: 'silent',
    })
  ).outputFiles[0].text;
const workers = [['empty Worker', `export default { async fetch() { return new Response('ok'); } };`]];
for (const [label, file, dir] of entries) workers.push([`${label}: import, parse the keyring, mint once`, await workerOf(file, dir)]);
// The CPU time workerd (a child of this process) has run, all its threads, in
// ms, from /proc/<pid>/task/*/schedstat (Linux; nanoseconds, and unlike the
// wall clock it does not count the time other processes held the CPU).
function workerdCpuMs() {
  let ns = 0;
  let found = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^[0-9]+$/.test(d))) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const m = /^\d+ \((.*)\) \S (\d+)/.exec(stat);
    if (!m || !m[1].startsWith('workerd') || Number(m[2]) !== process.pid) continue;
    found++;
    for (const task of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
  }
  return found === 1 ? ns / 1e6 : NaN;
}
async function coldStart(script) {
  const t = performance.now();
  const mf = new Miniflare({ modules: true, script, compatibilityDate: '2026-07-01', bindings: { KEYS: `1:primary:${secret}` } });
  const res = await mf.dispatchFetch('http://localhost/');
  const text = await res.text();
  const ms = performance.now() - t;
  const cpuMs = existsSync('/proc/self/schedstat') ? workerdCpuMs() : NaN;
  await mf.dispose();
  if (res.status !== 200 || (script !== workers[0][1] && text.length < 20)) throw new Error(`bench.mjs: the cold-start Worker answered ${res.status} ${text.slice(0, 200)}`);
  return { ms, cpuMs };
}
const cold = workers.map(() => []);
const coldCpu = workers.map(() => []);
await coldStart(workers[0][1]); // the first start of workerd also loads the binary from disk
for (let i = 0; i < COLD; i++) {
  for (let w = 0; w < workers.length; w++) {
    const { ms, cpuMs } = await coldStart(workers[w][1]);
    cold[w].push(ms);
    coldCpu[w].push(cpuMs);
  }
}

const f = (x) => Math.round(x).toLocaleString('en-US');
const cpu = os.cpus();
console.log(`node ${process.version}, ${cpu.length} x ${cpu[0]?.model}, ${new Date().toISOString()}`);
console.log(`load average before the run ${loadBefore}, after the Node measurements ${loadAfterNode}, at the end ${load()}`);
console.log(`package: ${DIST}; primitives: ${lib.cryptoBackend ? JSON.stringify(lib.cryptoBackend()) : 'pure (@noble/*; this build has no cryptoBackend())'}`);
console.log(`${ROUNDS} rounds x ${N} calls each, round-robin, median ns/op\n`);
console.log('| implementation | mint ns | verify ns | round trip ns | token chars |');
console.log('|---|---:|---:|---:|---:|');
if (rust) {
  console.log(`| Rust core, reqstate hmac-sha256 (cargo bench, same claims, lower of the runs before and after) | ${f(rust.hmac.mint)} | ${f(rust.hmac.verify)} | ${f(rust.hmac.roundTrip)} | |`);
  console.log(`| Rust core, reqstate xchacha20-poly1305 (idem) | ${f(rust.xchacha.mint)} | ${f(rust.xchacha.verify)} | ${f(rust.xchacha.roundTrip)} | |`);
}
for (const r of rows) console.log(`| ${r.name} | ${f(r.mint)} | ${f(r.verify)} | ${f(r.mint + r.verify)} | ${r.chars} |`);
const rt = (r) => r.mint + r.verify;
const sdk = rows[rows.length - 1];
const [h, x] = rows;
const [hd, xd] = rows.filter((r) => r.name.includes('drop-in'));
const old = rows.filter((r) => r.name.startsWith('BEFORE'));

console.log('');
if (rust) {
  console.log(`HMAC round trip / Rust core HMAC round trip: ${(rt(h) / rust.hmac.roundTrip).toFixed(2)}x (target <= 5x${rt(h) / rust.hmac.roundTrip <= 5 ? ': met' : `: missed by ${(rt(h) / rust.hmac.roundTrip - 5).toFixed(2)}x`})`);
  console.log(`XChaCha round trip / Rust core XChaCha round trip: ${(rt(x) / rust.xchacha.roundTrip).toFixed(2)}x`);
  console.log(`(Rust round trips, HMAC / XChaCha: before the Node run ${f(rustBefore.hmac.roundTrip)} / ${f(rustBefore.xchacha.roundTrip)} ns, after ${f(rustAfter.hmac.roundTrip)} / ${f(rustAfter.xchacha.roundTrip)} ns)`);
}
if (old.length === 2) console.log(`Codec round trip, this build / the BEFORE build: HMAC ${(rt(h) / rt(old[0])).toFixed(2)}x, XChaCha ${(rt(x) / rt(old[1])).toFixed(2)}x`);
console.log(`SDK codec round trip / HMAC round trip: Codec ${(rt(sdk) / rt(h)).toFixed(2)}x faster, drop-in ${(rt(sdk) / rt(hd)).toFixed(2)}x faster (target >= 5x)`);
console.log(`XChaCha round trip / SDK HMAC round trip: Codec ${(rt(x) / rt(sdk)).toFixed(2)}x, drop-in ${(rt(xd) / rt(sdk)).toFixed(2)}x (target <= 1)`);
console.log(`token chars: XChaCha ${x.chars} vs SDK ${sdk.chars}: ${((1 - x.chars / sdk.chars) * 100).toFixed(1)}% shorter (target >= 40%; ${Math.floor(sdk.chars * 0.6)} chars or fewer); HMAC ${h.chars}: ${((1 - h.chars / sdk.chars) * 100).toFixed(1)}% shorter; SDK without bind: ${sdk.unbound}`);
console.log('\n| bundle (esbuild --bundle --minify, platform neutral) | minified bytes | gzip -9 bytes | by package, minified |');
console.log('|---|---:|---:|---|');
for (const s of sizes) {
  const parts = Object.entries(s.byPackage)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  console.log(`| ${s.label}, ${s.what} | ${s.min} | ${s.gz} | ${parts} |`);
}
console.log(`\nworkerd cold start (fresh miniflare per sample, to the first response; ${COLD} samples each, round-robin; median [min..max] ms):`);
const emptyMedian = median(cold[0]);
for (let w = 0; w < workers.length; w++) {
  const m = median(cold[w]);
  // The difference of each round's pair (same moment, same load), median over the rounds.
  const d = median(cold[w].map((ms, i) => ms - cold[0][i]));
  const extra = w === 0 ? '' : `; above the empty Worker: median of the paired differences ${d >= 0 ? '+' : ''}${f(d)} ms (target <= +20${d <= 20 ? ': met' : `: missed by ${f(d - 20)} ms`}), difference of the medians ${f(m - emptyMedian)} ms`;
  console.log(`  ${workers[w][0]}: ${f(m)} [${f(Math.min(...cold[w]))}..${f(Math.max(...cold[w]))}]${extra}`);
}
if (coldCpu[0].every((x) => !Number.isNaN(x))) {
  console.log(`\nthe same starts in CPU time of the workerd process, all threads, to the first response (/proc schedstat; unlike the wall clock, not inflated by other processes' load), median [min..max] ms:`);
  const e = median(coldCpu[0]);
  for (let w = 0; w < workers.length; w++) {
    const m = median(coldCpu[w]);
    const d = median(coldCpu[w].map((x, i) => x - coldCpu[0][i]));
    console.log(`  ${workers[w][0]}: ${m.toFixed(1)} [${Math.min(...coldCpu[w]).toFixed(1)}..${Math.max(...coldCpu[w]).toFixed(1)}]${w === 0 ? '' : `; above the empty Worker: paired ${d >= 0 ? '+' : ''}${d.toFixed(1)} ms, medians ${(m - e).toFixed(1)} ms`}`);
  }
}
