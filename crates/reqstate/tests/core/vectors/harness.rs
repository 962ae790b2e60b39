//! How a vector is run against the core: codecs at the vector's clock
//! under its keys (minting ones drawing from a scripted random source), a
//! spent-token store over FORMAT.md §5.1's record names, and each
//! operation of the file (verify, consume, unseal, mint, seal) with where
//! it failed.

use std::time::Duration;

use reqstate::{
    Aad, Binding, Codec, Error, FixedClock, KeyStatus, Keyring, MAX_CONTEXT_LEN, MAX_TOOL_LEN,
    ReplayStore, SpentId, StoreError,
};

use crate::schema::{InvalidVector, MintInvalidVector, VectorFile, VectorKey, VectorPolicy};

/// The generator's own codecs (the scripted random source, key specs,
/// bindings, minting codecs, policies), so that what mints a vector here and
/// what minted it there cannot drift apart. The generator's other helpers
/// are not needed by the checks.
#[allow(dead_code)]
#[path = "../../../../../tests/vectors/generate/src/v1/codec.rs"]
mod codec;
pub(super) use codec::{
    Scripted, aad, bind, keyring_file_toml, keyring_toml, minting_codec, policy_of, spec_of,
    try_policy,
};

/// A spent-token store over record names (FORMAT.md §5.1), as the vectors
/// model it: `spent` names are live records; what a consume records is kept
/// with its `until`.
#[derive(Default)]
pub(super) struct NamedStore(std::sync::Mutex<std::collections::BTreeMap<String, u64>>);

impl NamedStore {
    pub(super) fn holding(names: &[String]) -> Self {
        NamedStore(std::sync::Mutex::new(
            names.iter().map(|n| (n.clone(), u64::MAX)).collect(),
        ))
    }

    pub(super) fn records(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().expect("store lock").clone()
    }
}

impl ReplayStore for NamedStore {
    fn insert_if_absent(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError> {
        let mut records = self.0.lock().map_err(|_| StoreError::Unavailable)?;
        let name = id.record_name();
        match records.get(&name) {
            Some(&live_until) if live_until > now => Ok(false),
            _ => {
                records.insert(name, until);
                Ok(true)
            }
        }
    }
}

/// The keyring every vector is verified under, statuses as in the file.
pub(super) fn verification_keyring(keys: &[VectorKey]) -> Keyring {
    Keyring::new(
        keys.iter()
            .map(|k| spec_of(k, KeyStatus::from_name(&k.status).expect("known status"))),
    )
    .expect("vector keyring is valid")
}

/// A codec that verifies under the file's keyring at `now`, default policy.
pub(super) fn verifying_codec(keys: &[VectorKey], now: u64) -> Codec {
    verifying_codec_with(keys, now, None)
}

/// A codec that verifies under the file's keyring at `now`, under a
/// vector's policy (or the default one).
pub(super) fn verifying_codec_with(
    keys: &[VectorKey],
    now: u64,
    policy: Option<VectorPolicy>,
) -> Codec {
    Codec::with_parts(
        verification_keyring(keys),
        policy_of(policy),
        FixedClock(now),
        Scripted::new(&[]),
    )
}

/// Where a vector's operation failed, and the error.
///
/// The caller's arguments are checked where they are built (FORMAT.md §8
/// step 0, "mint refusal 1"): the tool and context by [`Binding`], the
/// associated data by [`Aad`], the step and ttl by `mint`.
#[derive(Debug)]
pub(super) struct Failure {
    /// "binding", "aad", or the operation: "verify", "unseal", "mint", "seal".
    pub(super) at: &'static str,
    pub(super) error: Error,
}

impl Failure {
    fn at(at: &'static str) -> impl FnOnce(Error) -> Failure {
        move |error| Failure { at, error }
    }

    pub(super) fn reason(&self) -> &'static str {
        self.error.reason()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason(), self.at, self.error)
    }
}

/// Verifies (or unseals) as a vector says: returns the claims' times and step,
/// or the payload for unseal.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_verify(
    file: &VectorFile,
    operation: &str,
    token: &str,
    tool: &str,
    context: &str,
    expected_step: Option<&str>,
    now: u64,
    policy: Option<VectorPolicy>,
    decode_as: Option<&str>,
) -> Result<(u64, u64, String, Vec<u8>), Failure> {
    let codec = verifying_codec_with(&file.keys, now, policy);
    let context = hex::decode(context).expect("hex");
    fn go<T: serde::de::DeserializeOwned>(
        codec: &Codec,
        token: &str,
        tool: &str,
        step: Option<&str>,
        context: &[u8],
    ) -> Result<(u64, u64, String, Vec<u8>), Failure> {
        let binding = Binding::with_context_bytes(tool, context)
            .map_err(|e| Failure::at("binding")(e.into()))?;
        let expected = binding.expecting(step);
        let v = codec
            .verify::<T>(token, expected)
            .map_err(|e| Failure::at("verify")(e.into()))?;
        Ok((v.issued_at, v.expires_at, v.step, Vec::new()))
    }
    match (operation, decode_as) {
        ("unseal", _) => {
            let aad = Aad::new(&context).map_err(|e| Failure::at("aad")(e.into()))?;
            codec
                .unseal(token, aad)
                .map(|u| (0, 0, String::new(), u.payload))
                .map_err(|e| Failure::at("unseal")(e.into()))
        }
        // Not decoded: any well-formed state passes step 14.
        // Not decoded: any well-formed state passes step 14 (even one no
        // decoder represents, such as an unassigned simple value); its bytes
        // are returned as the token carries them.
        ("verify", None) => {
            let binding = Binding::with_context_bytes(tool, &context)
                .map_err(|e| Failure::at("binding")(e.into()))?;
            let expected = binding.expecting(expected_step);
            let v = codec
                .verify_raw(token, expected)
                .map_err(|e| Failure::at("verify")(e.into()))?;
            Ok((v.issued_at, v.expires_at, v.step, v.state))
        }
        ("verify", Some("uint")) => go::<u64>(&codec, token, tool, expected_step, &context),
        (other, d) => panic!("unknown operation {other} or decode_as {d:?}"),
    }
}

/// What a consume gave: (issued_at, expires_at, step, state CBOR, key id),
/// and the store's records after the call.
pub(super) type Consumed = (u64, u64, String, Vec<u8>, u32);

/// Consumes as a vector says, with a store holding `spent`: the outcome and
/// the records afterwards.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_consume(
    file: &VectorFile,
    token: &str,
    tool: &str,
    context: &str,
    expected_step: Option<&str>,
    now: u64,
    policy: Option<VectorPolicy>,
    spent: &[String],
) -> (
    Result<Consumed, Failure>,
    std::collections::BTreeMap<String, u64>,
) {
    let codec = verifying_codec_with(&file.keys, now, policy);
    let context = hex::decode(context).expect("hex");
    let store = NamedStore::holding(spent);
    let result = (|| {
        let binding = Binding::with_context_bytes(tool, &context)
            .map_err(|e| Failure::at("binding")(e.into()))?;
        let expected = binding.expecting(expected_step);
        // The state's exact bytes: the raw half, then the store (what
        // `Codec::consume` does, without decoding the state).
        let v = codec
            .verify_single_use_raw(token, expected)
            .map_err(reqstate::ConsumeError::from)
            .and_then(|redemption| redemption.redeem(&store))
            .map_err(|e| Failure::at("consume")(reqstate::Error::from(e)))?;
        Ok((v.issued_at, v.expires_at, v.step, v.state, v.key_id.get()))
    })();
    (result, store.records())
}

/// Runs an `invalid` vector's operation as it says; a refused consume must
/// leave the store as it was.
pub(super) fn run_invalid(file: &VectorFile, v: &InvalidVector) -> Result<(), Failure> {
    if v.operation == "consume" {
        if let Some(decode_as) = &v.decode_as {
            assert_eq!(decode_as, "uint", "{}: decode_as", v.name);
            return consume_decoding_uint(file, v);
        }
        let (result, records) = run_consume(
            file,
            &v.token,
            &v.tool,
            &v.context,
            v.expected_step.as_deref(),
            v.now,
            v.policy,
            &v.spent,
        );
        // A refused consume records nothing (FORMAT.md §8 step 15).
        let before: std::collections::BTreeMap<String, u64> =
            v.spent.iter().map(|n| (n.clone(), u64::MAX)).collect();
        if result.is_err() {
            assert_eq!(
                records, before,
                "{}: a refused consume changed the store",
                v.name
            );
        }
        return result.map(drop);
    }
    assert!(v.spent.is_empty(), "{}: `spent` without consume", v.name);
    run_verify(
        file,
        &v.operation,
        &v.token,
        &v.tool,
        &v.context,
        v.expected_step.as_deref(),
        v.now,
        v.policy,
        v.decode_as.as_deref(),
    )
    .map(drop)
}

/// A refused consume whose caller decodes the state as an unsigned integer
/// (`Codec::consume::<u64>`, steps 0-15): the store must be left as it was.
fn consume_decoding_uint(file: &VectorFile, v: &InvalidVector) -> Result<(), Failure> {
    let codec = verifying_codec_with(&file.keys, v.now, v.policy);
    let context = hex::decode(&v.context).expect("hex");
    let store = NamedStore::holding(&v.spent);
    let before = store.records();
    let binding = Binding::with_context_bytes(&v.tool, &context)
        .map_err(|e| Failure::at("binding")(e.into()))?;
    let expected = binding.expecting(v.expected_step.as_deref());
    let result = codec
        .consume::<u64>(&v.token, expected, &store)
        .map(drop)
        .map_err(|e| Failure::at("consume")(reqstate::Error::from(e)));
    if result.is_err() {
        assert_eq!(
            store.records(),
            before,
            "{}: a refused consume changed the store",
            v.name
        );
    }
    result
}

/// A state given as CBOR bytes, as the core's minting takes it: a value,
/// or bytes that are not one well-formed item, which fail to serialize so
/// that the core refuses them (`state_encoding`) at its own step, after its
/// argument checks (FORMAT.md §8, mint refusal 4).
enum BytesState {
    Value(ciborium::Value),
    NotOneItem,
}

impl BytesState {
    fn from_bytes(bytes: &[u8]) -> Self {
        let mut rest = bytes;
        match ciborium::from_reader::<ciborium::Value, _>(&mut rest) {
            Ok(value) if rest.is_empty() => BytesState::Value(value),
            _ => BytesState::NotOneItem,
        }
    }
}

impl serde::Serialize for BytesState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BytesState::Value(value) => value.serialize(serializer),
            BytesState::NotOneItem => Err(serde::ser::Error::custom(
                "the state bytes are not one well-formed CBOR item",
            )),
        }
    }
}

/// Mints (or seals) as a `mint_invalid` vector says.
pub(super) fn run_mint(file: &VectorFile, v: &MintInvalidVector) -> Result<String, Failure> {
    let random = hex::decode(&v.random).expect("hex");
    let codec = minting_codec(&file.keys, v.key_id, v.now, &random, policy_of(v.policy));
    let context = hex::decode(&v.context).expect("hex");
    match v.operation.as_str() {
        "mint" => {
            let state = BytesState::from_bytes(&hex::decode(&v.state_cbor).expect("hex"));
            let binding = Binding::with_context_bytes(&v.tool, &context)
                .map_err(|e| Failure::at("binding")(e.into()))?;
            let ttl = Duration::from_secs(v.ttl);
            if v.single_use {
                codec.mint_single_use(binding, &v.step, &state, ttl)
            } else {
                codec.mint(binding, &v.step, &state, ttl)
            }
            .map(|m| m.token)
            .map_err(|e| Failure::at("mint")(e.into()))
        }
        "seal" => {
            let aad = Aad::new(&context).map_err(|e| Failure::at("aad")(e.into()))?;
            codec
                .seal(&hex::decode(&v.payload).expect("hex"), aad)
                .map(|s| s.token)
                .map_err(|e| Failure::at("seal")(e.into()))
        }
        other => panic!("unknown operation {other}"),
    }
}

/// Where an argument check belongs, from the arguments themselves: a tool or
/// context out of range fails when the [`Binding`] is built, associated data
/// out of range when the [`Aad`] is; nothing else is checked there.
pub(super) fn argument_stage(
    operation: &str,
    tool: &str,
    context_hex: &str,
) -> Option<&'static str> {
    let context_len = context_hex.len() / 2;
    match operation {
        "verify" | "consume" | "mint"
            if tool.is_empty() || tool.len() > MAX_TOOL_LEN || context_len > MAX_CONTEXT_LEN =>
        {
            Some("binding")
        }
        "unseal" | "seal" if context_len > MAX_CONTEXT_LEN => Some("aad"),
        _ => None,
    }
}
