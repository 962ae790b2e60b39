// The call context (FORMAT.md §7): SHA-256 over a label, the principal, the
// audience, the method and SHA-256 of the JCS (RFC 8785) text of the
// arguments, parsed strictly from the text as received.
import { primitives } from './primitives.js';
import { concat, isWellFormed, lp, utf8 } from './bytes.js';
import { ReqstateError } from './errors.js';

/** SHA-256 on this runtime's primitives (node:crypto or pure). */
const sha256 = (data: Uint8Array): Uint8Array => primitives.sha256(data);

export const CALL_CONTEXT_LABEL = 'reqstate/v1 call-context-jcs';
/** Deepest nesting of arrays and objects accepted in the arguments. */
export const MAX_ARGUMENTS_DEPTH = 128;

/** Which §7 rule refused the arguments (the error's reason is always `invalid_argument`). */
export type ArgumentsRule = 'not_json' | 'duplicate_key' | 'inexact_number' | 'lone_surrogate' | 'too_deep';

export class InvalidArgumentsError extends ReqstateError {
  readonly rule: ArgumentsRule;
  /** For already-parsed arguments: the JSON path of the value refused (`$.items[2].when`). */
  readonly path?: string;
  constructor(rule: ArgumentsRule, detail: string, path?: string) {
    super('invalid_argument', path === undefined ? detail : `${path}: ${detail}`);
    this.name = 'InvalidArgumentsError';
    this.rule = rule;
    if (path !== undefined) this.path = path;
  }
}

const notJson = (what = 'the arguments are not one JSON value') => new InvalidArgumentsError('not_json', what);

/** `sign|digits|exponent` of a decimal literal; '0' for zero. */
function decimalValue(text: string): string {
  const negative = text.startsWith('-');
  const body = (negative ? text.slice(1) : text).toLowerCase();
  const [mantissa, exponent = '0'] = body.split('e');
  const [whole, frac = ''] = mantissa.split('.');
  const digits = (whole + frac).replace(/^0+/, '');
  if (digits === '') return '0';
  const magnitude = exponent.replace(/^[+-]/, '').replace(/^0+/, '');
  let exp = magnitude.length > 15 ? 1e15 : Number(magnitude || '0');
  if (exponent.startsWith('-')) exp = -exp;
  const stripped = digits.replace(/0+$/, '');
  exp += digits.length - stripped.length - frac.length;
  return `${negative ? '-' : '+'}|${stripped}|${exp}`;
}

function exactNumber(literal: string): number {
  const d = Number(literal);
  if (!Number.isFinite(d)) throw new InvalidArgumentsError('inexact_number', `a number overflows an IEEE double`);
  if (decimalValue(String(d)) !== decimalValue(literal)) {
    throw new InvalidArgumentsError('inexact_number', `a number is not exactly an IEEE double (JCS would print ${String(d)})`);
  }
  return d;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

type JsonValue = null | boolean | number | string | JsonValue[] | Map<string, JsonValue>;

/** Strict RFC 8259 parser keeping what JSON.parse hides (duplicate keys, lone surrogates, literals). */
function parseStrict(text: string): JsonValue {
  let pos = 0;
  const ws = () => {
    while (pos < text.length && WS.has(text.charCodeAt(pos))) pos++;
  };
  const string = (): string => {
    const start = pos++;
    for (;;) {
      if (pos >= text.length) throw notJson();
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c < 0x20) throw notJson();
      pos += c === 0x5c ? 2 : 1;
    }
    pos++;
    let s: string;
    try {
      s = JSON.parse(text.slice(start, pos)) as string;
    } catch {
      throw notJson();
    }
    if (!isWellFormed(s)) throw new InvalidArgumentsError('lone_surrogate', 'a string of the arguments holds a lone surrogate');
    return s;
  };
  const value = (depth: number): JsonValue => {
    const c = text[pos];
    if (c === '{' || c === '[') {
      if (depth + 1 > MAX_ARGUMENTS_DEPTH) throw new InvalidArgumentsError('too_deep', 'the arguments are nested deeper than 128 levels');
      pos++;
      ws();
      const close = c === '{' ? '}' : ']';
      const arr: JsonValue[] = [];
      const obj = new Map<string, JsonValue>();
      if (text[pos] === close) {
        pos++;
      } else {
        for (;;) {
          ws();
          if (c === '{') {
            if (text[pos] !== '"') throw notJson();
            const key = string();
            ws();
            if (text[pos] !== ':') throw notJson();
            pos++;
            ws();
            const v = value(depth + 1);
            if (obj.has(key)) throw new InvalidArgumentsError('duplicate_key', 'the arguments repeat an object key');
            obj.set(key, v);
          } else {
            arr.push(value(depth + 1));
          }
          ws();
          if (text[pos] === ',') pos++;
          else if (text[pos] === close) {
            pos++;
            break;
          } else throw notJson();
        }
      }
      return c === '{' ? obj : arr;
    }
    if (c === '"') return string();
    if (text.startsWith('null', pos)) return (pos += 4), null;
    if (text.startsWith('true', pos)) return (pos += 4), true;
    if (text.startsWith('false', pos)) return (pos += 5), false;
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m) throw notJson();
    pos += m[0].length;
    return exactNumber(m[0]);
  };
  ws();
  const result = value(0);
  ws();
  if (pos !== text.length) throw notJson();
  return result;
}

function serialize(v: JsonValue, out: string[]): void {
  if (v instanceof Map) {
    // RFC 8785 §3.2.3: members sorted by the UTF-16 code units of their names (JS string order).
    const keys = [...v.keys()].sort();
    out.push('{');
    keys.forEach((k, i) => {
      if (i > 0) out.push(',');
      out.push(JSON.stringify(k), ':');
      serialize(v.get(k)!, out);
    });
    out.push('}');
  } else if (Array.isArray(v)) {
    out.push('[');
    v.forEach((x, i) => {
      if (i > 0) out.push(',');
      serialize(x, out);
    });
    out.push(']');
  } else if (typeof v === 'number') {
    out.push(String(v)); // ECMAScript Number::toString; -0 prints as 0
  } else {
    out.push(JSON.stringify(v)); // strings escaped as JCS requires (no lone surrogates here)
  }
}

/**
 * The JCS text of the JSON text `argumentsJson`. Throws
 * {@link InvalidArgumentsError} (`invalid_argument`) for text that is not one
 * JSON value or that JCS cannot represent exactly.
 */
export function canonicalJson(argumentsJson: string): string {
  if (typeof argumentsJson !== 'string') throw notJson('the arguments must be JSON text');
  const out: string[] = [];
  serialize(parseStrict(argumentsJson), out);
  return out.join('');
}

/** `$`, `$.name`, `$["a b"]`, `$[2]`: where a value sits in the arguments. */
function member(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

const article = (name: string) => (/^[AEIO]/.test(name) ? `an ${name}` : `a ${name}`);

function unrepresentable(path: string, what: string, rule: ArgumentsRule = 'not_json'): InvalidArgumentsError {
  return new InvalidArgumentsError(rule, what, path);
}

function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  if (proto === null || proto === Object.prototype) return true;
  // A plain object of another realm (a vm context, an iframe).
  return Object.getPrototypeOf(proto) === null && Object.prototype.toString.call(v) === '[object Object]' && typeof (proto as { constructor?: { name?: unknown } }).constructor === 'function' && (proto as { constructor: { name: unknown } }).constructor.name === 'Object';
}

function typeName(v: object): string {
  const ctor = (Object.getPrototypeOf(v) as { constructor?: { name?: unknown } } | null)?.constructor;
  return typeof ctor === 'function' && typeof ctor.name === 'string' && ctor.name !== '' ? ctor.name : 'object';
}

/** One own property's value, read once (a getter is called once). */
function read(obj: object, key: string): unknown {
  const d = Object.getOwnPropertyDescriptor(obj, key);
  if (d === undefined) return undefined;
  return 'value' in d ? d.value : d.get?.call(obj);
}

/**
 * Already-parsed arguments as the JSON value they stand for, refusing every
 * value JSON (and so JCS) cannot represent faithfully rather than printing it
 * as something else, as JSON.stringify would (a Map as `{}`, a Date as its
 * toJSON text, a hole as null, a function as nothing): two different
 * arguments must never share a context. An `undefined` property is left out
 * (as JSON.stringify, and so the wire, leaves it out); `undefined` anywhere
 * else is refused.
 */
function valueToJson(v: unknown, path: string, depth: number): JsonValue {
  switch (typeof v) {
    case 'string':
      if (!isWellFormed(v)) throw unrepresentable(path, 'the string holds a lone surrogate', 'lone_surrogate');
      return v;
    case 'number':
      if (!Number.isFinite(v)) throw unrepresentable(path, `${v} has no JSON form here`, 'inexact_number');
      return v;
    case 'boolean':
      return v;
    case 'bigint':
      throw unrepresentable(path, 'a BigInt has no JSON form here; pass a number (up to 2^53) or a string');
    case 'undefined':
      throw unrepresentable(path, 'undefined has no JSON form here; pass null, or leave the property out');
    case 'symbol':
      throw unrepresentable(path, 'a symbol has no JSON form here');
    case 'function':
      throw unrepresentable(path, 'a function has no JSON form here');
  }
  if (v === null) return null;
  const o = v as object;
  if (depth >= MAX_ARGUMENTS_DEPTH) throw unrepresentable(path, 'the arguments are nested deeper than 128 levels (or hold a cycle)', 'too_deep');
  const symbolKeyed = () => {
    if (Object.getOwnPropertySymbols(o).length > 0) throw unrepresentable(path, 'a symbol-keyed property has no JSON form here');
  };
  if (Array.isArray(o)) {
    symbolKeyed();
    if (typeof (o as { toJSON?: unknown }).toJSON === 'function') throw unrepresentable(path, 'an array with toJSON has no JSON form here; pass what toJSON returns');
    const out: JsonValue[] = [];
    const n = o.length;
    for (let i = 0; i < n; i++) {
      if (!Object.prototype.hasOwnProperty.call(o, i)) throw unrepresentable(`${path}[${i}]`, 'a hole in a sparse array has no JSON form here; fill it (null)');
      out.push(valueToJson(read(o, String(i)), `${path}[${i}]`, depth + 1));
    }
    for (const key of Object.getOwnPropertyNames(o)) {
      if (key !== 'length' && !(String(Number(key)) === key && Number(key) >= 0 && Number(key) < n)) {
        throw unrepresentable(member(path, key), "an array's own property other than its elements has no JSON form here");
      }
    }
    return out;
  }
  if (o instanceof Date) throw unrepresentable(path, 'a Date has no JSON form here; pass an ISO string');
  if (o instanceof Map) throw unrepresentable(path, 'a Map has no JSON form here; pass a plain object');
  if (o instanceof Set) throw unrepresentable(path, 'a Set has no JSON form here; pass an array');
  if (ArrayBuffer.isView(o) || o instanceof ArrayBuffer) {
    throw unrepresentable(path, `${article(typeName(o))} has no JSON form here; pass an array of numbers or a base64 string`);
  }
  if (typeof (o as { toJSON?: unknown }).toJSON === 'function' && !Object.prototype.hasOwnProperty.call(o, 'toJSON')) {
    throw unrepresentable(path, 'an object with toJSON has no JSON form here; pass what toJSON returns');
  }
  if (!isPlainObject(o)) throw unrepresentable(path, `${article(typeName(o))} is not a plain object; pass a plain object`);
  symbolKeyed();
  const out = new Map<string, JsonValue>();
  for (const key of Object.getOwnPropertyNames(o)) {
    const at = member(path, key);
    if (!isWellFormed(key)) throw unrepresentable(at, 'the key holds a lone surrogate', 'lone_surrogate');
    if (!Object.prototype.propertyIsEnumerable.call(o, key)) throw unrepresentable(at, 'a non-enumerable property has no JSON form here');
    const value = read(o, key);
    if (value === undefined) continue; // left out, as JSON.stringify leaves it out
    out.set(key, valueToJson(value, at, depth + 1));
  }
  return out;
}

export interface CallContextParts {
  principal: string;
  audience: string;
  method: string;
  /** The arguments' JSON text as received (preferred: only the text shows duplicate keys and how numbers were written). */
  argumentsJson?: string;
  /**
   * Already-parsed arguments (plain objects, arrays, strings, finite numbers,
   * booleans, null), canonicalized as the JSON value they are; `{}` when
   * neither is given. Anything JSON cannot represent faithfully (a Map, Set,
   * Date or other object with toJSON, a class instance, a function, a
   * symbol, undefined in an array, a BigInt, a typed array, a sparse array,
   * NaN or an infinity, a lone surrogate) is refused with an
   * {@link InvalidArgumentsError} naming its path; an `undefined` property is
   * left out, as JSON.stringify leaves it out.
   */
  arguments?: unknown;
}

/**
 * The 32-byte context binding a token to one caller and one request:
 * `SHA-256(label ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ SHA-256(JCS(arguments)))`.
 */
export function callContext(parts: CallContextParts): Uint8Array {
  let text: string;
  if (parts.argumentsJson !== undefined) text = canonicalJson(parts.argumentsJson);
  else if (parts.arguments === undefined) text = '{}';
  else {
    const out: string[] = [];
    serialize(valueToJson(parts.arguments, '$', 0), out);
    text = out.join('');
  }
  const field = (s: unknown, name: string) => {
    if (typeof s !== 'string' || !isWellFormed(s)) throw new ReqstateError('invalid_argument', `${name} must be a string of UTF-8 text`);
    return lp(utf8(s));
  };
  const args = sha256(utf8(text));
  return sha256(concat(utf8(CALL_CONTEXT_LABEL), field(parts.principal, 'principal'), field(parts.audience, 'audience'), field(parts.method, 'method'), args));
}
