// The vector suite (test/suite.js) on Node, against the built package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as lib from '../dist/index.js';
import { runSuite } from './suite.js';

const REPO = new URL('../../../', import.meta.url);
const read = (p) => readFileSync(new URL(p, REPO), 'utf8');

test('tests/vectors/v1.json and call_context.json, both directions (Node)', () => {
  const r = runSuite(lib, read('tests/vectors/v1.json'), read('tests/vectors/call_context.json'));
  assert.deepEqual(r.failures, []);
  assert.ok(r.passed > 300, `only ${r.passed} checks ran`);
  assert.equal(r.passed, r.expected);
});
