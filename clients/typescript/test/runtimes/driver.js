// The vector suite under Deno, Bun or Node (run by test/runtimes.test.js and
// test/backends.test.js): prints one JSON line with the result and the
// primitives the package chose (cryptoBackend()), and exits non-zero on any
// failure.
import * as lib from '../../dist/index.js';
import { runSuite } from '../suite.js';

const root = new URL('../../../../', import.meta.url);
const runtime = globalThis.Deno ? 'deno' : globalThis.Bun ? 'bun' : globalThis.process?.versions?.node ? 'node' : 'unknown';
async function read(path) {
  const url = new URL(path, root);
  if (runtime === 'deno') return Deno.readTextFile(url);
  if (runtime === 'bun') return Bun.file(url.pathname).text();
  if (runtime === 'node') return (await import('node:fs')).readFileSync(url, 'utf8');
  throw new Error('driver.js runs under Deno, Bun or Node');
}
const r = runSuite(lib, await read('tests/vectors/v1.json'), await read('tests/vectors/call_context.json'));
const version = runtime === 'deno' ? Deno.version.deno : runtime === 'bun' ? Bun.version : process.version;
console.log(JSON.stringify({ runtime, version, backend: lib.cryptoBackend(), passed: r.passed, expected: r.expected, failures: r.failures }));
if (r.failures.length > 0 || r.passed !== r.expected) {
  if (runtime === 'deno') Deno.exit(1);
  else process.exit(1);
}
