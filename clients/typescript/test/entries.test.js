// The package's two entries, bundled as a Worker builder bundles them
// (esbuild, platform neutral, honouring package.json "sideEffects"):
// @reqstate/codec reads TOML keyrings; @reqstate/codec/compact has no TOML
// parser in its bundle and refuses TOML text clearly; both mint the same
// tokens, and neither bundle imports a Node module.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const secret = Buffer.alloc(32, 9).toString('base64');
const toml = `[[key]]\nid = 7\nstatus = "primary"\nalgorithm = "hmac-sha256"\nsecret = "${secret}"\n`;
const compact = `7:primary:hmac-sha256:${secret}`;

// Bundles `entry` with a probe that reports what each keyring form gives, then runs it (its own module instance).
async function probe(entry) {
  const contents = `
import { Codec, ReqstateError } from './dist/${entry}';
const mint = (keyring) => {
  try {
    return new Codec({ keyring, clock: () => 1764460800 }).mint({ tool: 't', step: 's', state: { a: 1 } }).token;
  } catch (e) {
    return e instanceof ReqstateError ? { reason: e.reason, message: e.message } : { other: String(e) };
  }
};
export const result = { toml: mint(${JSON.stringify(toml)}), compact: mint(${JSON.stringify(compact)}) };`;
  const built = await esbuild.build({ stdin: { contents, resolveDir: PKG, loader: 'js' }, bundle: true, format: 'esm', platform: 'neutral', write: false, metafile: true, logLevel: 'silent' });
  const text = built.outputFiles[0].text;
  const inputs = Object.keys(built.metafile.inputs);
  const { result } = await import(`data:text/javascript;base64,${Buffer.from(text).toString('base64')}`);
  return { result, inputs, text };
}

test('@reqstate/codec bundled: TOML and compact keyrings, the same token', async () => {
  const { result, inputs, text } = await probe('index.js');
  assert.ok(inputs.some((f) => f.includes('smol-toml')), 'the main entry carries the TOML parser');
  assert.equal(typeof result.toml, 'string', JSON.stringify(result.toml));
  assert.equal(result.toml, result.compact);
  assert.doesNotMatch(text, /\bimport\b[^;]*["']node:|\brequire\(/);
});

test('@reqstate/codec/compact bundled: no TOML parser; TOML text refused with invalid_keyring', async () => {
  const main = await probe('index.js');
  const { result, inputs, text } = await probe('compact.js');
  assert.ok(!inputs.some((f) => f.includes('smol-toml')), `smol-toml in the compact bundle: ${inputs.join(', ')}`);
  assert.ok(text.length < main.text.length - 8000, `compact bundle ${text.length} bytes, main ${main.text.length}`);
  assert.equal(result.compact, main.result.compact);
  assert.equal(result.toml.reason, 'invalid_keyring');
  assert.match(result.toml.message, /TOML keyring needs the TOML reader: import from "@reqstate\/codec"/);
  assert.doesNotMatch(result.toml.message, new RegExp(secret.slice(0, 12).replace(/[+/]/g, '\\$&')));
});

test('the compact entry exports what the main entry exports', async () => {
  const main = await import('../dist/index.js');
  const lite = await import('../dist/compact.js');
  assert.deepEqual(Object.keys(lite).sort(), Object.keys(main).sort());
  assert.equal(lite.Codec, main.Codec);
});
