// The call context (FORMAT.md §7): SHA-256 over a label, the principal, the
// audience, the method and SHA-256 of the JCS (RFC 8785) text of the
// arguments, parsed strictly from the text as received.
import { sha256 } from '@noble/hashes/sha2.js';
import { concat, isWellFormed, lp, utf8 } from './bytes.js';
import { ReqstateError } from './errors.js';

export const CALL_CONTEXT_LABEL = 'reqstate/v1 call-context-jcs';
/** Deepest nesting of arrays and objects accepted in the arguments. */
export const MAX_ARGUMENTS_DEPTH = 128;

/** Which §7 rule refused the arguments (the error's reason is always `invalid_argument`). */
export type ArgumentsRule = 'not_json' | 'duplicate_key' | 'inexact_number' | 'lone_surrogate' | 'too_deep';

export class InvalidArgumentsError extends ReqstateError {
  readonly rule: ArgumentsRule;
  constructor(rule: ArgumentsRule, detail: string) {
    super('invalid_argument', detail);
    this.name = 'InvalidArgumentsError';
    this.rule = rule;
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

function stringifyArguments(value: unknown): string {
  const check = (v: unknown, depth: number): void => {
    if (typeof v === 'number' && !Number.isFinite(v)) throw new InvalidArgumentsError('inexact_number', `${v} is not a JSON number`);
    if (v !== null && typeof v === 'object') {
      if (depth >= MAX_ARGUMENTS_DEPTH) throw new InvalidArgumentsError('too_deep', 'the arguments are nested deeper than 128 levels');
      for (const child of Object.values(v)) check(child, depth + 1);
    }
  };
  check(value, 0);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw notJson(`the arguments cannot be JSON: ${(e as Error).message}`);
  }
  if (text === undefined) throw notJson(`the arguments cannot be JSON: ${typeof value}`);
  return text;
}

export interface CallContextParts {
  principal: string;
  audience: string;
  method: string;
  /** The arguments' JSON text as received (preferred: only the text shows duplicate keys and how numbers were written). */
  argumentsJson?: string;
  /** Already-parsed arguments (printed with JSON.stringify, then canonicalized); `{}` when neither is given. */
  arguments?: unknown;
}

/**
 * The 32-byte context binding a token to one caller and one request:
 * `SHA-256(label ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ SHA-256(JCS(arguments)))`.
 */
export function callContext(parts: CallContextParts): Uint8Array {
  const text = parts.argumentsJson ?? (parts.arguments === undefined ? '{}' : stringifyArguments(parts.arguments));
  const field = (s: unknown, name: string) => {
    if (typeof s !== 'string' || !isWellFormed(s)) throw new ReqstateError('invalid_argument', `${name} must be a string of UTF-8 text`);
    return lp(utf8(s));
  };
  const args = sha256(utf8(canonicalJson(text)));
  return sha256(concat(utf8(CALL_CONTEXT_LABEL), field(parts.principal, 'principal'), field(parts.audience, 'audience'), field(parts.method, 'method'), args));
}
