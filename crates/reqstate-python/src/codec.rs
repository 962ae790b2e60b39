//! `Codec` (`PyCodec`): mint, verify, seal, unseal and consume under a
//! `Keyring` and a policy. Each call takes the keys the keyring has in use
//! (the one live keyring, `keyring::KeyringState`) and runs under the
//! call's clock (`now=`, `clock::at`); the batch calls (`mint_many`,
//! `verify_many`) release the GIL while the core works.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use reqstate::{Aad, Codec, Policy, Verified};

use crate::binding::{PyBinding, bytes_param, text_arg};
use crate::clock::at;
use crate::errors::{self, Kind};
use crate::keyring::{Loaded, PyKeyring, log};
use crate::results::{PyMinted, PySealed, PyUnsealed, PyVerified, minted, verified};
use crate::single_use::{PyReplayStore, ask_store, decode_redemption, decoded, spent_record};
use crate::state;

/// Mints and verifies requestState tokens under a keyring and a policy.
#[pyclass(module = "reqstate._native", name = "Codec", frozen)]
pub(crate) struct PyCodec {
    /// The live keyring: each call takes the keys in use from it.
    keyring: Py<PyKeyring>,
    policy: Policy,
    /// The newest keys of the keyring whose schedule this policy accepts
    /// (docs/KEYRING.md, "Keys on a schedule"): a reload whose `retire_at`
    /// would refuse tokens still live under this policy is not used by this
    /// codec, which keeps these keys, as the sidecar keeps its keyring.
    usable: ArcSwap<Loaded>,
    /// The last generation refused by this policy, reported once.
    refused: AtomicU64,
}

/// `seal`'s and `unseal`'s `aad`: bytes, empty when not given.
fn aad_param<'a>(aad: Option<&'a Bound<'_, PyAny>>) -> PyResult<std::borrow::Cow<'a, [u8]>> {
    match aad {
        Some(aad) => bytes_param(aad, "aad"),
        None => Ok(std::borrow::Cow::Borrowed(&[])),
    }
}

/// One batch item's outcome, computed without the GIL.
enum Outcome<T, E> {
    Done(T),
    Failed(E),
}

impl PyCodec {
    /// The core codec for one call: this policy over the keys the keyring
    /// has in use (reloaded first if its `auto_reload` is due). A clone of
    /// the keyring's codec: reference counts, not a copy of the keys.
    fn core(&self, py: Python<'_>) -> Codec {
        let state = &self.keyring.get().state;
        let loaded = state.in_use();
        state.report(py);
        let usable = self.usable.load();
        if loaded.generation() == usable.generation() {
            return loaded.codec.clone().with_policy(self.policy);
        }
        match loaded.codec.keyring().check_schedule(&self.policy) {
            Ok(()) => {
                self.usable.store(Arc::clone(&loaded));
                loaded.codec.clone().with_policy(self.policy)
            }
            Err(e) => {
                let generation = loaded.generation();
                if self.refused.swap(generation, Ordering::Relaxed) != generation {
                    log(
                        py,
                        "warning",
                        &format!(
                            "keyring reload refused by this Codec's policy; still using the \
                             previous keys: invalid keyring: {e}"
                        ),
                    );
                }
                usable.codec.clone().with_policy(self.policy)
            }
        }
    }
}

#[pymethods]
impl PyCodec {
    /// A codec over `keyring` with a policy: the longest token (64..=1048576
    /// characters), the clock leeway (0..=600 s) and the longest lifetime
    /// (1..=2592000 s).
    #[new]
    #[pyo3(signature = (keyring, *, max_token_len = Policy::DEFAULT_MAX_TOKEN_LEN, clock_leeway = Policy::DEFAULT_CLOCK_LEEWAY, max_lifetime = Policy::DEFAULT_MAX_LIFETIME))]
    fn new(
        py: Python<'_>,
        keyring: Bound<'_, PyKeyring>,
        max_token_len: usize,
        clock_leeway: u64,
        max_lifetime: u64,
    ) -> PyResult<Self> {
        let invalid = |e: reqstate::InvalidArgument| errors::invalid_argument(py, &e.to_string());
        let policy = Policy::new()
            .with_max_token_len(max_token_len)
            .map_err(invalid)?
            .with_clock_leeway(Duration::from_secs(clock_leeway))
            .map_err(invalid)?
            .with_max_lifetime(Duration::from_secs(max_lifetime))
            .map_err(invalid)?;
        // A schedule that retires a key while tokens it minted are live
        // under this policy is refused here, as the sidecar refuses it.
        let loaded = keyring.get().state.in_use();
        loaded
            .codec
            .keyring()
            .check_schedule(&policy)
            .map_err(|e| errors::keyring(py, &e.to_string()))?;
        Ok(PyCodec {
            keyring: keyring.unbind(),
            policy,
            usable: ArcSwap::new(loaded),
            refused: AtomicU64::new(0),
        })
    }

    /// The keyring.
    #[getter]
    fn keyring(&self, py: Python<'_>) -> Py<PyKeyring> {
        self.keyring.clone_ref(py)
    }

    /// The longest token minted or accepted, in characters.
    #[getter]
    fn max_token_len(&self) -> usize {
        self.policy.max_token_len()
    }

    /// The clock leeway, in seconds.
    #[getter]
    fn clock_leeway(&self) -> u64 {
        self.policy.clock_leeway()
    }

    /// The longest lifetime minted or accepted, in seconds.
    #[getter]
    fn max_lifetime(&self) -> u64 {
        self.policy.max_lifetime()
    }

    /// Mints a token for `binding` at `step` carrying `state` (a
    /// JSON-compatible value, or bytes), valid `ttl` seconds. `single_use`:
    /// a token accepted once, by `consume`. `now`: the clock reading to use
    /// (unix seconds; default the system clock).
    #[pyo3(signature = (binding, step, state = None, *, ttl = 600, single_use = false, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn mint(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &Bound<'_, PyAny>,
        state: Option<&Bound<'_, PyAny>>,
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let step = text_arg(py, step, "step")?;
        let none = py.None().into_bound(py);
        let state = state::PyState::new(state.unwrap_or(&none));
        self.mint_state(py, binding, &step, &state, ttl, single_use, now)
    }

    /// `mint` with the state given as one CBOR item, embedded byte for
    /// byte. It must be in preferred serialization as the core writes it
    /// (docs/CLI.md `--state-cbor-hex`); otherwise `state_encoding`.
    #[pyo3(signature = (binding, step, state_cbor, *, ttl = 600, single_use = false, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn mint_cbor(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &Bound<'_, PyAny>,
        state_cbor: &Bound<'_, PyAny>,
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let step = text_arg(py, step, "step")?;
        let state_cbor = bytes_param(state_cbor, "state_cbor")?;
        let state = match state::from_cbor(&state_cbor) {
            Ok(value) => state::State::Value(value),
            Err(why) => state::State::Unencodable(why),
        };
        self.mint_state(py, binding, &step, &state, ttl, single_use, now)
    }

    /// Verifies a state token against `binding` and, if given,
    /// `expected_step`; decodes its state. Raises `TokenRefused` (its
    /// `reason` says why) for any token that is not accepted.
    #[pyo3(signature = (token, binding, *, expected_step = None, now = None))]
    fn verify(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<PyVerified> {
        let v = self.verify_raw_at(py, token, binding, expected_step, now)?;
        verified(py, v, true)
    }

    /// `verify` without decoding the state: `state` is None and
    /// `state_cbor` holds the state item's bytes as the token carries them.
    #[pyo3(signature = (token, binding, *, expected_step = None, now = None))]
    fn verify_cbor(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<PyVerified> {
        let v = self.verify_raw_at(py, token, binding, expected_step, now)?;
        verified(py, v, false)
    }

    /// Consumes a single-use token: verifies it (FORMAT.md §8 steps 0-14,
    /// decoding the state included), then records it as spent in `store`
    /// (step 15, last), and gives its contents only the first time
    /// (`replayed` after). A token that is not single-use is `wrong_kind`.
    ///
    /// `store` is a `MemoryReplayStore` (recorded without leaving Rust) or
    /// any object with `insert_if_absent(record: SpentRecord) -> bool`
    /// (`reqstate.ReplayStore`, such as `reqstate.redis.RedisReplayStore`):
    /// True if this call recorded the token, False if it was recorded
    /// before; it raises `TokenRefused` (`replay_store_unavailable`,
    /// `replay_store_full`) when it cannot record. Any other exception it
    /// raises is refused as `replay_store_unavailable` (its cause attached):
    /// never accepted unrecorded. The store is called outside the call's
    /// `now=` and only once every other check has passed.
    #[pyo3(signature = (token, binding, store, *, expected_step = None, now = None, decode = true))]
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        store: &Bound<'_, PyAny>,
        expected_step: Option<&str>,
        now: Option<u64>,
        decode: bool,
    ) -> PyResult<PyVerified> {
        let memory = store.cast::<PyReplayStore>().ok();
        if memory.is_none() && !store.hasattr(pyo3::intern!(py, "insert_if_absent"))? {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "store must be a MemoryReplayStore or have an insert_if_absent(record) method \
                 (reqstate.ReplayStore, e.g. reqstate.redis.RedisReplayStore)",
            ));
        }
        let redemption = {
            let codec = self.core(py);
            let b = binding.binding(py)?;
            let expected = b.expecting(expected_step);
            // Steps 0-13 of FORMAT.md §8, under the call's clock.
            at(now, || codec.verify_single_use_raw(token, expected))
                .map_err(|e| errors::refused(py, &e))?
        };
        // Step 14, decoding the state into what the caller asked for, comes
        // before step 15: a state that does not decode is refused unrecorded.
        let redemption =
            decode_redemption(py, redemption, decode).map_err(|e| errors::refused(py, &e))?;
        // Step 15, last.
        let v = match memory {
            Some(memory) => redemption.redeem(&*memory.get().store),
            None => {
                let record = spent_record(py, &redemption, self.policy.clock_leeway());
                let recorded = ask_store(py, store, record)?;
                redemption.finish(Ok(recorded))
            }
        }
        .map_err(|e| errors::consume(py, &e))?;
        Ok(decoded(py, v))
    }

    /// Seals opaque bytes under the primary key, bound to `aad` (at most
    /// 65536 bytes): for SDKs that stamp and check their own claims.
    #[pyo3(signature = (payload, aad = None))]
    fn seal(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        aad: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySealed> {
        let payload = bytes_param(payload, "payload")?;
        let aad = aad_param(aad)?;
        let aad = Aad::new(&aad).map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        let sealed = self
            .core(py)
            .seal(&payload, aad)
            .map_err(|e| errors::mint(py, &e))?;
        Ok(PySealed {
            token: PyString::new(py, &sealed.token).unbind(),
            key_id: sealed.key_id.get(),
        })
    }

    /// Opens a token made by `seal` with the same `aad`. Raises
    /// `TokenRefused` otherwise.
    #[pyo3(signature = (token, aad = None))]
    fn unseal(
        &self,
        py: Python<'_>,
        token: &str,
        aad: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyUnsealed> {
        let aad = aad_param(aad)?;
        let aad = Aad::new(&aad).map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        let opened = self
            .core(py)
            .unseal(token, aad)
            .map_err(|e| errors::refused(py, &e))?;
        Ok(PyUnsealed {
            payload: PyBytes::new(py, &opened.payload).unbind(),
            key_id: opened.key_id.get(),
        })
    }

    /// Mints one token per state, all for `binding` and `step`, with the
    /// GIL released while the core works. Returns, in order, a `Minted` or
    /// the `MintRefused`/`InvalidArgument` exception (not raised) per state.
    #[pyo3(signature = (binding, step, states, *, ttl = 600, now = None))]
    fn mint_many<'py>(
        &self,
        py: Python<'py>,
        binding: &PyBinding,
        step: &Bound<'py, PyAny>,
        states: &Bound<'py, PyAny>,
        ttl: u64,
        now: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let step = text_arg(py, step, "step")?;
        let states: Vec<state::State> = states
            .try_iter()?
            .map(|s| s.map(|s| state::from_py(&s)))
            .collect::<PyResult<_>>()?;
        let codec = self.core(py);
        let b = binding.binding(py)?;
        let ttl = Duration::from_secs(ttl);
        let outcomes: Vec<Outcome<reqstate::Minted, reqstate::MintError>> = py.detach(|| {
            at(now, || {
                states
                    .iter()
                    .map(|s| match codec.mint(b, &step, s, ttl) {
                        Ok(m) => Outcome::Done(m),
                        Err(e) => Outcome::Failed(e),
                    })
                    .collect()
            })
        });
        let out = PyList::empty(py);
        for outcome in outcomes {
            match outcome {
                Outcome::Done(m) => out.append(Bound::new(py, minted(py, m))?)?,
                Outcome::Failed(e) => {
                    let kind = match e {
                        reqstate::MintError::InvalidArgument(_) => Kind::InvalidArgument,
                        _ => Kind::Mint,
                    };
                    out.append(errors::instance(py, kind, e.reason(), &e.to_string())?)?
                }
            }
        }
        Ok(out)
    }

    /// Verifies many tokens against one `binding` (and `expected_step`),
    /// with the GIL released while the core works. Returns, in order, a
    /// `Verified` or the `TokenRefused` exception (not raised) per token.
    #[pyo3(signature = (tokens, binding, *, expected_step = None, now = None))]
    fn verify_many<'py>(
        &self,
        py: Python<'py>,
        tokens: &Bound<'py, PyAny>,
        binding: &PyBinding,
        expected_step: Option<String>,
        now: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tokens: Vec<String> = tokens
            .try_iter()?
            .map(|t| t.and_then(|t| t.extract::<String>()))
            .collect::<PyResult<_>>()?;
        let codec = self.core(py);
        let b = binding.binding(py)?;
        let expected = b.expecting(expected_step.as_deref());
        let outcomes: Vec<Result<Verified<Vec<u8>>, reqstate::Refusal>> = py.detach(|| {
            at(now, || {
                tokens
                    .iter()
                    .map(|t| codec.verify_raw(t, expected))
                    .collect()
            })
        });
        let out = PyList::empty(py);
        for outcome in outcomes {
            let item = match outcome
                .map_err(|e| errors::refused(py, &e))
                .and_then(|v| verified(py, v, true))
            {
                Ok(v) => Bound::new(py, v)?.into_any(),
                Err(e) => e.into_value(py).into_bound(py).into_any(),
            };
            out.append(item)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "Codec(max_token_len={}, clock_leeway={}, max_lifetime={})",
            self.policy.max_token_len(),
            self.policy.clock_leeway(),
            self.policy.max_lifetime()
        )
    }
}

impl PyCodec {
    #[allow(clippy::too_many_arguments)]
    fn mint_state(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &str,
        state: &impl serde::Serialize,
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let codec = self.core(py);
        let b = binding.binding(py)?;
        let ttl = Duration::from_secs(ttl);
        let m = at(now, || {
            if single_use {
                codec.mint_single_use(b, step, state, ttl)
            } else {
                codec.mint(b, step, state, ttl)
            }
        })
        .map_err(|e| errors::mint(py, &e))?;
        Ok(minted(py, m))
    }

    fn verify_raw_at(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<Verified<Vec<u8>>> {
        let codec = self.core(py);
        let b = binding.binding(py)?;
        let expected = b.expecting(expected_step);
        at(now, || codec.verify_raw(token, expected)).map_err(|e| errors::refused(py, &e))
    }
}
