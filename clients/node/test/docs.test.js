// @ts-check
// The README's snippets are the example files verbatim, and the quickstart
// runs against a real sidecar and prints what the README says.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Sidecar } from './support/sidecar.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

test('every README code block marked <!-- file: … --> is that file, verbatim', () => {
  const marked = [...readme.matchAll(/<!-- file: (\S+) -->\n```js\n([\s\S]*?)```\n/g)];
  assert.deepEqual(
    marked.map((m) => m[1]),
    ['examples/quickstart.js', 'examples/handlers.js', 'examples/mcp-server.js'],
  );
  for (const [, file, body] of marked) {
    assert.equal(body, readFileSync(new URL(`../${file}`, import.meta.url), 'utf8'), `README block for ${file} is stale`);
  }
});

/** @type {Sidecar} */
let sidecar;
before(async () => {
  sidecar = await Sidecar.start({ authToken: 'quickstart-token' });
});
after(async () => {
  await sidecar?.stop();
});

test('examples/quickstart.js runs as the README says', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['examples/quickstart.js'], {
    cwd: root,
    env: { ...process.env, REQSTATE_TARGET: sidecar.unixTarget, REQSTATE_TOKEN: 'quickstart-token' },
    timeout: 20_000,
  });
  assert.equal(stdout, 'new value: 15\ntampered: REASON_AUTHENTICATION_FAILED\n');
});

test('examples/quickstart.js without the bearer token: TransportError UNAUTHENTICATED, exit 1', async () => {
  /** @type {NodeJS.ProcessEnv} */
  const env = { ...process.env, REQSTATE_TARGET: sidecar.tcpTarget };
  delete env.REQSTATE_TOKEN;
  await assert.rejects(promisify(execFile)(process.execPath, ['examples/quickstart.js'], { cwd: root, env, timeout: 20_000 }), (err) => {
    const e = /** @type {any} */ (err);
    assert.equal(e.code, 1);
    assert.match(e.stderr, /reqstate call failed: UNAUTHENTICATED/);
    return true;
  });
});
