// Preloaded with `node --import` (test/backends.test.js): takes away
// process.getBuiltinModule, as on Node before 20.16, so that @reqstate/codec
// loads its pure JavaScript primitives (the Workers path) on this Node.
delete process.getBuiltinModule;
if (typeof process.getBuiltinModule === 'function') throw new Error('no-native.mjs: process.getBuiltinModule is still there');
