// The Web-platform globals the library uses, declared here so that the
// library compiles without DOM or Node types (it runs on workerd, Node >= 20,
// Deno and Bun, which all provide them).
declare global {
  interface TextEncoder {
    encode(input?: string): Uint8Array;
  }
  var TextEncoder: { new (): TextEncoder };
  interface TextDecoder {
    decode(input?: Uint8Array): string;
  }
  var TextDecoder: { new (label?: string, options?: { fatal?: boolean; ignoreBOM?: boolean }): TextDecoder };
  var crypto: { getRandomValues<T extends Uint8Array>(array: T): T };
  // Timers (the Redis store's per-call deadline and its clock checks) and the
  // monotonic clock (the Redis store sees the wall clock step with it).
  function setTimeout(callback: () => void, ms: number): unknown;
  function clearTimeout(handle: unknown): void;
  function setInterval(callback: () => void, ms: number): unknown;
  function clearInterval(handle: unknown): void;
  var performance: { now(): number };
}
export {};
