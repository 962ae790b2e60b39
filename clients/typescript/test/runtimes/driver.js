// The vector suite under Deno or Bun (run by test/runtimes.test.js):
// prints one JSON line with the result and exits non-zero on any failure.
import * as lib from '../../dist/index.js';
import { runSuite } from '../suite.js';

const root = new URL('../../../../', import.meta.url);
const runtime = globalThis.Deno ? 'deno' : globalThis.Bun ? 'bun' : 'unknown';
async function read(path) {
  const url = new URL(path, root);
  if (runtime === 'deno') return Deno.readTextFile(url);
  if (runtime === 'bun') return Bun.file(url.pathname).text();
  throw new Error('driver.js runs under Deno or Bun');
}
const r = runSuite(lib, await read('tests/vectors/v1.json'), await read('tests/vectors/call_context.json'));
const version = runtime === 'deno' ? Deno.version.deno : Bun.version;
console.log(JSON.stringify({ runtime, version, passed: r.passed, expected: r.expected, failures: r.failures }));
if (r.failures.length > 0 || r.passed !== r.expected) {
  if (runtime === 'deno') Deno.exit(1);
  else process.exit(1);
}
