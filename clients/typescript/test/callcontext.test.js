// callContext's value form (`arguments`: already-parsed arguments): every
// value that JSON cannot represent faithfully is refused with an
// InvalidArgumentsError naming its JSON path, instead of being printed as
// something else (a Map as {}, a Date as its toJSON string, a hole as null)
// and sharing a context with other arguments. The corpus
// (tests/vectors/call_context.json, text only) is run by suite.js; these are
// the JavaScript-only cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { InvalidArgumentsError, ReqstateError, callContext, toHex } from '../dist/index.js';
import { REPO } from './support/rust.js';

const parts = { principal: 'user-42', audience: 'counter-server', method: 'tools/call' };
const ctx = (args) => toHex(callContext({ ...parts, arguments: args }));
const ctxText = (text) => toHex(callContext({ ...parts, argumentsJson: text }));

/** Asserts that `args` is refused: InvalidArgumentsError, invalid_argument, `rule`, a message starting with the path. */
function refused(args, rule, message) {
  assert.throws(
    () => callContext({ ...parts, arguments: args }),
    (e) => {
      assert.ok(e instanceof InvalidArgumentsError && e instanceof ReqstateError, String(e));
      assert.equal(e.reason, 'invalid_argument');
      assert.equal(e.rule, rule, e.message);
      if (message instanceof RegExp) assert.match(e.message, message);
      else assert.equal(e.message, `invalid argument: ${message}`);
      return true;
    },
  );
}

class Point {
  constructor() {
    this.x = 1;
  }
}

test('values with no faithful JSON form are refused, the message naming the path', () => {
  refused({ items: [1, 2, { when: new Date(0) }] }, 'not_json', '$.items[2].when: a Date has no JSON form here; pass an ISO string');
  refused({ a: new Map([['x', 1]]) }, 'not_json', '$.a: a Map has no JSON form here; pass a plain object');
  refused({ a: new Set([1]) }, 'not_json', '$.a: a Set has no JSON form here; pass an array');
  refused({ a: { toJSON: () => 'x' } }, 'not_json', /^invalid argument: \$\.a\.toJSON: a function has no JSON form/);
  refused({ a: Object.create({ toJSON: () => 'x' }) }, 'not_json', /^invalid argument: \$\.a: an object with toJSON has no JSON form here/);
  refused({ a: new Point() }, 'not_json', '$.a: a Point is not a plain object; pass a plain object');
  refused({ f() {} }, 'not_json', /^invalid argument: \$\.f: a function has no JSON form here/);
  refused([() => 1], 'not_json', /^invalid argument: \$\[0\]: a function/);
  refused({ s: Symbol('x') }, 'not_json', /^invalid argument: \$\.s: a symbol has no JSON form here/);
  refused({ [Symbol('k')]: 1 }, 'not_json', /^invalid argument: \$: a symbol-keyed property has no JSON form here/);
  refused([1, undefined], 'not_json', '$[1]: undefined has no JSON form here; pass null, or leave the property out');
  refused({ n: 10n }, 'not_json', /^invalid argument: \$\.n: a BigInt has no JSON form here; pass a number \(up to 2\^53\) or a string/);
  refused({ b: new Uint8Array([1, 2]) }, 'not_json', /^invalid argument: \$\.b: a Uint8Array has no JSON form here/);
  refused({ b: Buffer.from('hi') }, 'not_json', /^invalid argument: \$\.b: a Buffer has no JSON form here/);
  refused({ b: new ArrayBuffer(2) }, 'not_json', /^invalid argument: \$\.b: an ArrayBuffer has no JSON form here/);
  refused({ b: new DataView(new ArrayBuffer(2)) }, 'not_json', /^invalid argument: \$\.b: a DataView has no JSON form here/);
  // eslint-disable-next-line no-sparse-arrays
  refused({ xs: [1, , 3] }, 'not_json', '$.xs[1]: a hole in a sparse array has no JSON form here; fill it (null)');
  refused({ xs: Object.assign([1], { extra: 2 }) }, 'not_json', /^invalid argument: \$\.xs\.extra: an array's own property other than its elements has no JSON form here/);
  refused({ s: new String('x') }, 'not_json', '$.s: a String is not a plain object; pass a plain object');
  refused({ r: /x/ }, 'not_json', '$.r: a RegExp is not a plain object; pass a plain object');
  refused({ e: new Error('x') }, 'not_json', '$.e: an Error is not a plain object; pass a plain object');
  refused({ p: Promise.resolve(1) }, 'not_json', '$.p: a Promise is not a plain object; pass a plain object');
  refused(Object.defineProperty({}, 'hidden', { value: 1, enumerable: false }), 'not_json', /^invalid argument: \$\.hidden: a non-enumerable property has no JSON form here/);
  refused({ x: NaN }, 'inexact_number', '$.x: NaN has no JSON form here');
  refused({ x: [Infinity] }, 'inexact_number', '$.x[0]: Infinity has no JSON form here');
  refused({ x: -Infinity }, 'inexact_number', '$.x: -Infinity has no JSON form here');
  refused({ s: 'a\ud800b' }, 'lone_surrogate', '$.s: the string holds a lone surrogate');
  refused({ ['k\udc00']: 1 }, 'lone_surrogate', '$["k\\udc00"]: the key holds a lone surrogate');
  refused({ 'a b': { 'c"d': [new Date(0)] } }, 'not_json', '$["a b"]["c\\"d"][0]: a Date has no JSON form here; pass an ISO string');
});

test('a Map or a toJSON object no longer shares a context with another argument', () => {
  // The finding: both were printed as {} (or as toJSON's text), the same context as other arguments.
  assert.throws(() => ctx({ to: new Map([['account', 'mallory']]) }), InvalidArgumentsError);
  assert.throws(() => ctx({ to: new Map([['account', 'bob']]) }), InvalidArgumentsError);
  assert.throws(() => ctx({ when: new Date(0) }), InvalidArgumentsError);
  assert.throws(() => ctx({ when: { toJSON: () => '1970-01-01T00:00:00.000Z' } }), InvalidArgumentsError);
});

test('nesting: 128 levels accepted, 129 refused; a cycle is refused, not a stack overflow', () => {
  const deep = (n) => (n === 0 ? [] : [deep(n - 1)]);
  assert.equal(ctx(deep(127)), ctxText('['.repeat(128) + ']'.repeat(128)));
  refused(deep(128), 'too_deep', /nested deeper than 128 levels/);
  const cyclic = { a: [] };
  cyclic.a.push(cyclic);
  refused(cyclic, 'too_deep', /nested deeper than 128 levels/);
});

test('plain data gives the context of its JSON text: the whole accepted corpus, null-prototype objects, -0', async () => {
  const corpus = JSON.parse(readFileSync(path.join(REPO, 'tests/vectors/call_context.json'), 'utf8'));
  let n = 0;
  for (const c of corpus.cases.filter((c) => c.context !== undefined)) {
    assert.equal(toHex(callContext({ principal: c.principal, audience: c.audience, method: c.method, arguments: JSON.parse(c.arguments_json) })), c.context, c.name);
    n++;
  }
  assert.ok(n >= 40);
  const bare = Object.assign(Object.create(null), { b: [1, -0, 1e21, 'é'], a: null });
  assert.equal(ctx(bare), ctxText('{"a":null,"b":[1,0,1e+21,"é"]}'));
  assert.equal(ctx({ current: 10 }), '9bcb61ae906b769f72df7ae9e5e74721017ab7cf9b4c795b0444539ecde3a8d6');
  // A key JSON.parse makes an own property (not the prototype), and a plain object from another realm.
  assert.equal(ctx(JSON.parse('{"__proto__":{"x":1},"toJSON":5}')), ctxText('{"__proto__":{"x":1},"toJSON":5}'));
  const { runInNewContext } = await import('node:vm');
  assert.equal(ctx(runInNewContext('({ a: [1, { b: "c" }] })')), ctxText('{"a":[1,{"b":"c"}]}'));
});

test('an undefined property is left out, as JSON.stringify (and so the wire) leaves it out', () => {
  assert.equal(ctx({ current: 10, note: undefined }), ctx({ current: 10 }));
  assert.equal(ctx({ a: { b: undefined } }), ctxText('{"a":{}}'));
  // Arguments left out altogether are {} (CallContextParts.arguments).
  assert.equal(toHex(callContext(parts)), ctxText('{}'));
});

test('each property is read once (a getter cannot show one value to the check and another to the digest)', () => {
  let reads = 0;
  const args = {
    get amount() {
      return ++reads;
    },
  };
  assert.equal(ctx(args), ctx({ amount: 1 }));
  assert.equal(reads, 1);
});
