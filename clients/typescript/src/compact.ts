// @reqstate/codec/compact: the same API as @reqstate/codec without the TOML
// parser (a third of the bundle), for a Worker whose keyring is a secret
// binding in the compact form (or built with Keyring.fromKeys). TOML keyring
// text is refused there with `invalid_keyring`, naming the main entry.
export * from './api.js';
