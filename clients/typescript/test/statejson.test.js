// tests/vectors/state_json.json through the TypeScript mapping
// (src/statejson.ts): the one JSON -> CBOR mapping of a state (docs/CLI.md,
// "JSON to CBOR: the one mapping"), the `--state-cbor-hex` check, and the
// JSON form printed back (it must map back to the same bytes).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { UsageError, checkPreferredCbor, stateJsonToCbor, stateToJson } from '../dist/statejson.js';
import { MAX_STATE_DEPTH } from '../dist/cbor.js';

const file = JSON.parse(readFileSync(new URL('../../../tests/vectors/state_json.json', import.meta.url), 'utf8'));
const hex = (b) => Buffer.from(b).toString('hex');
const bytes = (h) => {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(h)) throw new UsageError('--state-cbor-hex: not hex');
  return new Uint8Array(Buffer.from(h, 'hex'));
};

test('every json case has a known outcome and the file has each', () => {
  const outcomes = new Set(file.json_cases.map((c) => c.outcome));
  assert.deepEqual([...outcomes].sort(), ['ok', 'state_encoding', 'usage']);
});

for (const c of file.json_cases) {
  test(`json: ${c.name}`, () => {
    if (c.outcome === 'usage') {
      assert.throws(() => stateJsonToCbor(c.json), UsageError);
      return;
    }
    const r = stateJsonToCbor(c.json);
    if (c.outcome === 'state_encoding') {
      assert.deepEqual(r, { tooDeep: true });
      return;
    }
    assert.equal(c.outcome, 'ok');
    assert.ok('cbor' in r, 'not too deep');
    assert.equal(hex(r.cbor), c.cbor_hex);
    // The JSON form: the vector's, or one that maps back to the same bytes.
    const printed = stateToJson(r.cbor);
    assert.notEqual(printed, undefined);
    const again = stateJsonToCbor(printed);
    assert.equal(hex(again.cbor), c.cbor_hex, `printed ${printed}`);
    assert.equal(hex(stateJsonToCbor(c.state).cbor), c.cbor_hex);
  });
}

for (const c of file.cbor_hex_cases) {
  test(`cbor hex: ${c.name}`, () => {
    if (c.outcome === 'usage') {
      assert.throws(() => checkPreferredCbor(bytes(c.cbor_hex)), UsageError);
      return;
    }
    const depth = checkPreferredCbor(bytes(c.cbor_hex));
    if (c.outcome === 'state_encoding') {
      assert.ok(depth > MAX_STATE_DEPTH, `depth ${depth}`);
      return;
    }
    assert.equal(c.outcome, 'ok');
    assert.ok(depth <= MAX_STATE_DEPTH, `depth ${depth}`);
    const printed = stateToJson(bytes(c.cbor_hex));
    if (c.state === undefined) {
      assert.equal(printed, undefined);
    } else {
      assert.notEqual(printed, undefined);
      assert.equal(hex(stateJsonToCbor(printed).cbor), hex(stateJsonToCbor(c.state).cbor), `printed ${printed}`);
    }
  });
}
