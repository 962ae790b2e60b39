//! Why the format is what it is, and what was rejected. (Documentation only.)
//!
//! # One header byte, then a LEB128 key id
//! Version (4 bits), kind (2 bits) and algorithm (2 bits) share one byte: a
//! state token under HMAC starts `0x11`, under XChaCha20-Poly1305 `0x12`. The
//! key id is an unsigned LEB128 integer, one byte for ids below 128. Both are
//! authenticated. The algorithm field exists so that `reqstate inspect` can
//! describe a token without keys, and so that a mismatch fails loudly; it never
//! selects the algorithm: the key with that id does.
//!
//! # The tool and context are bound, not stored
//! A verifier always knows which tool it is serving and who is calling, so
//! these travel as associated data, like PASETO's implicit assertions. Storing
//! the tool would cost 23 characters for the reference claims and push the AEAD
//! token past 112 characters; storing a short fingerprint instead would make
//! the binding only as strong as the fingerprint. The price is that a token
//! presented to the wrong tool fails as [`crate::Refusal::AuthenticationFailed`],
//! not as a distinct "wrong tool" error. The step, which the server reads to
//! decide what to do next, is stored, so [`crate::Refusal::WrongStep`] is distinct.
//!
//! # XChaCha20-Poly1305, not AES-256-GCM with a random 96-bit nonce
//! The per-key budget must be at least 2^48 tokens at a collision probability
//! of at most 2^-32. A random 96-bit nonce collides with probability about
//! n²/2^97: 2^-1 at n = 2^48. XChaCha20-Poly1305 takes a 192-bit nonce; the
//! first 128 bits derive a one-message key with HChaCha20 (cheap: one ChaCha
//! block function) and the last 64 bits are the ChaCha20-Poly1305 nonce. The
//! collision probability at 2^48 tokens is about 2^96/2^193 = 2^-97. A
//! per-token HKDF-derived AES-GCM key was measured first and rejected: HKDF
//! (≈0.20 µs) plus AES key setup (≈0.16 µs) cost more than the seal itself.
//!
//! # A truncated HMAC, and no nonce, for the integrity-only mode
//! HMAC-SHA256 is deterministic and needs no nonce, so it has no collision
//! budget at all; its tag is truncated to 128 bits (forgery probability 2^-128
//! per attempt), saving 16 bytes. The state is readable by the client.
//!
//! # A hand-written envelope, ciborium for the state
//! The envelope is four fixed map entries; writing and parsing it by hand lets
//! the verifier insist on the canonical encoding (one byte string per token)
//! and costs nothing. The state is whatever `serde` type the server uses, so
//! it is written by `ciborium` and, after a depth-bounded well-formedness walk,
//! read by `cbor4ii` (eight times faster on the reference claims), falling back
//! to `ciborium` for what `cbor4ii` cannot read into self-describing types
//! (CBOR tags). The stored bytes are never re-encoded; one reading differs
//! from the value written: a `ciborium::Value` bignum (tag 2 or 3) that fits
//! in 128 bits reads back as an `Integer`, as `ciborium` itself reads it.
//!
//! # Keys are derived once
//! Each configured secret goes through HKDF-SHA256 with a label naming the
//! algorithm, so a secret pasted under both algorithms yields unrelated keys.
//! Derivation happens when the keyring loads, never per token.
//!
//! What is wiped, exactly: the configured secret (and the base64 text it came
//! from); the derived XChaCha20 key; every HKDF output before it is handed to
//! `ring`; per token, our copy of the working key given to HChaCha20, the
//! HChaCha20 subkey it returns, and the random bytes that hedge the nonce;
//! the HMAC keys (the HMAC-SHA256 working key and an XChaCha key's nonce key
//! `K_n`), held as RustCrypto `hmac` states over `sha2` (precomputed inner and
//! outer hash states, cloned per token), which their `zeroize` feature wipes
//! on drop, clones included. What is not: HKDF's PRK inside
//! `ring::hkdf::Prk`, which `ring` does not zeroize; per token, `ring`'s
//! `LessSafeKey` holds a copy of the one-message ChaCha20 subkey on the stack
//! for the duration of one call, and the `chacha20` crate's HChaCha20 keeps
//! its working state in a stack array it does not wipe. None of these can be
//! reached without `unsafe` or a fork of the dependency. That residue is
//! listed in the threat model (docs/SECURITY.md).
//!
//! # Randomness and nonces
//! Each XChaCha20-Poly1305 nonce is *hedged* (FORMAT.md §4.2): 24 random bytes
//! from the injected [`crate::SecureRandom`] go through HMAC-SHA256 under a
//! per-key nonce key together with the associated data and the body. A random
//! source that repeats itself (a VM snapshot restored twice, CRIU, a fork into
//! a new PID namespace where the child keeps its parent's pid, a broken
//! generator) then gives the same nonce only to the very same message, so
//! nonce reuse across different messages cannot happen, whatever cloned the
//! process. The cost is one HMAC over the token's bytes per AEAD mint
//! (docs/BENCHMARKS.md).
//!
//! With `std`, [`crate::Codec::new`] draws `r` from [`crate::BufferedRandom`],
//! a per-thread pool of OS randomness, through
//! [`crate::SecureRandom::fill_hedge`], with no process-id check: a `getpid`
//! system call cost 200 to 400 ns per token on the project's VM, more than the
//! hedge itself, and bought nothing the hedge does not already give. After any clone, an ordinary `fork` included, a parent
//! and child drawing the same pool bytes give the same nonce only to the very
//! same message, and then mint the very same token. `fill` (single-use token
//! ids, key generation) has no pool at all: it asks the OS on every call, since
//! a pid check cannot see a clone that keeps the pid, and two single-use tokens
//! with one id would share one spent-token record.
//!
//! # The API: typed bindings, one error type per kind of failure
//! A verifier needs a token, a tool, an expected step and a context: three
//! strings and some bytes that a tired caller can pass in the wrong order and
//! still compile. So the tool and context are one [`crate::Binding`], built
//! (and checked, once) from a tool name and a 32-byte [`crate::CallContext`];
//! the step it expects is added with [`crate::Binding::step`]. `mint` takes
//! the binding and the step, `verify` the binding and (optionally) the step,
//! and no two arguments of either have the same type.
//!
//! Verification returns [`crate::Refusal`] and nothing else: every way it can
//! fail is the token's (or an attacker's), answered with an error to the
//! client. What the caller can get wrong (an empty tool name, a policy value
//! out of bounds, arguments that are not JSON) is an
//! [`crate::InvalidArgument`] raised when the value is built, before any
//! token is looked at. A server can therefore answer every `Refusal` with
//! MCP's `-32602` and treat everything else as its own bug.
//!
//! # No I/O in the core
//! A keyring file may name secrets kept elsewhere (`secret_file`,
//! `secret_env`). Reading them is I/O, and I/O needs policy (file ownership
//! and mode, FIFOs, symlinks) that belongs with whoever reads the keyring
//! file itself. So the core hands each reference to a
//! [`crate::SecretSource`] the caller implements; the sidecar's applies the
//! checks it applies to the keyring file. The core parses and derives only,
//! and builds unchanged for `wasm32-unknown-unknown` and `x86_64-unknown-none`.
