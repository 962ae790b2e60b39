// The vector suite inside workerd (bundled by esbuild with the vector files
// as text; run by test/runtimes.test.js through miniflare).
import * as lib from '../../dist/index.js';
import { runSuite } from '../suite.js';
import vectors from '../../../../tests/vectors/v1.json';
import callContexts from '../../../../tests/vectors/call_context.json';

export default {
  async fetch() {
    const t = Date.now();
    const r = runSuite(lib, vectors, callContexts);
    return Response.json({ runtime: 'workerd', backend: lib.cryptoBackend(), passed: r.passed, expected: r.expected, failures: r.failures, ms: Date.now() - t, navigator: globalThis.navigator?.userAgent });
  },
};
