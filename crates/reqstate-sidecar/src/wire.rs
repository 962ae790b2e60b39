//! Between the core and the wire: proto messages to core calls and back,
//! and the core's errors as wire reasons and gRPC statuses.

use std::time::Duration;

use reqstate::{
    Binding, Codec, InvalidArgument, MintError, Redemption, Refusal, StoreError, Verified,
};
use reqstate_cli_state::{state_from_json, state_json_error, state_to_json_text};
use reqstate_proto::v1 as pb;
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic_types::{ErrorDetails, StatusExt as _};

/// Name of the trailer that repeats the reason of a failed call, lower case
/// (`too_large`, `unauthenticated`). Kept for clients written before the
/// rich error details; the canonical form is the `google.rpc.ErrorInfo`
/// (see [`error_status`]).
pub const REASON_METADATA_KEY: &str = "reqstate-reason";

/// The `domain` of every `google.rpc.ErrorInfo` the sidecar sends.
pub const ERROR_DOMAIN: &str = "reqstate";

/// A failed call in gRPC's standard rich error model, which every gRPC
/// library can read: `code` and `message`, and in the `grpc-status-details-bin`
/// trailer a `google.rpc.Status` whose details hold one
/// `google.rpc.ErrorInfo { reason, domain: "reqstate" }`, `reason` being
/// `reason` in upper case (`TOO_LARGE`, `UNAUTHENTICATED`; the proto's
/// `Reason` names without `REASON_`, or a refusal of the call gate). The
/// lower-case name also travels in the [`REASON_METADATA_KEY`] trailer.
pub fn error_status(code: tonic::Code, reason: &'static str, message: impl Into<String>) -> Status {
    let details = ErrorDetails::with_error_info(
        reason.to_ascii_uppercase(),
        ERROR_DOMAIN,
        std::collections::HashMap::new(),
    );
    let mut metadata = MetadataMap::new();
    metadata.insert(REASON_METADATA_KEY, MetadataValue::from_static(reason));
    Status::with_error_details_and_metadata(code, message, details, metadata)
}

/// `INVALID_ARGUMENT` for a request out of range, as [`error_status`].
pub fn invalid_argument(message: impl Into<String>) -> Status {
    error_status(tonic::Code::InvalidArgument, "invalid_argument", message)
}

/// The wire `Reason` of a core reason name (`Refusal::reason`,
/// `MintError::reason`, …): the proto names each `REASON_<NAME>`. A reason
/// the proto does not have yet is `REASON_UNSPECIFIED`, never success.
pub fn wire_reason(reason: &str) -> pb::Reason {
    pb::Reason::from_str_name(&format!("REASON_{}", reason.to_ascii_uppercase()))
        .unwrap_or(pb::Reason::Unspecified)
}

/// The RPC error for a failed Mint or Seal: the caller asked for something
/// out of range, unless randomness failed; with its reason, as
/// [`error_status`].
pub fn mint_error_status(error: &MintError) -> Status {
    let code = match error {
        MintError::RandomnessUnavailable => tonic::Code::Unavailable,
        _ => tonic::Code::InvalidArgument,
    };
    error_status(code, error.reason(), error.to_string())
}

/// Why a Verify or Unseal item did not verify: the caller's request was out
/// of range (a gRPC error), or the token was refused (an in-band answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyFailure {
    /// The request's tool, context or aad is out of range.
    Caller(InvalidArgument),
    /// The token was refused.
    Refused(Refusal),
    /// The replay store did not record the token (not accepted, fail
    /// closed; not refused either: the caller may retry), with what the
    /// caller should know beyond the reason: a clock out of bounds, an
    /// outcome that is unknown and how to retry.
    NotRecorded(StoreError, reqstate_spent_store::StoreDetail),
}

impl VerifyFailure {
    /// The in-band answer of a batch item: a caller error is reported as
    /// `REASON_INVALID_ARGUMENT` for that item alone.
    pub fn in_band(&self) -> pb::VerifyResponse {
        match self {
            VerifyFailure::Caller(e) => not_valid(e.reason(), e.to_string()),
            VerifyFailure::Refused(refusal) => refused_verify_response(refusal),
            VerifyFailure::NotRecorded(..) => not_valid(self.reason(), self.detail()),
        }
    }

    /// The reason name, for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyFailure::Caller(e) => e.reason(),
            VerifyFailure::Refused(e) => e.reason(),
            VerifyFailure::NotRecorded(e, _) => e.reason(),
        }
    }

    /// What a person reads: the error, and the store's explanation if any.
    pub fn detail(&self) -> String {
        match self {
            VerifyFailure::Caller(e) => e.to_string(),
            VerifyFailure::Refused(e) => e.to_string(),
            VerifyFailure::NotRecorded(e, why) => why.message(e),
        }
    }
}

impl From<reqstate_spent_store::Unspent> for VerifyFailure {
    fn from(e: reqstate_spent_store::Unspent) -> Self {
        match e {
            reqstate_spent_store::Unspent::Refused(refusal) => VerifyFailure::Refused(refusal),
            reqstate_spent_store::Unspent::NotRecorded(error, why) => {
                VerifyFailure::NotRecorded(error, why)
            }
        }
    }
}

impl From<InvalidArgument> for VerifyFailure {
    fn from(e: InvalidArgument) -> Self {
        VerifyFailure::Caller(e)
    }
}

impl From<Refusal> for VerifyFailure {
    fn from(e: Refusal) -> Self {
        VerifyFailure::Refused(e)
    }
}

/// Why a Mint item was not minted: its `state_json` was refused (the
/// message is the command line's for `--state-json`, from
/// [`state_json_error`]), or the core refused the rest.
#[derive(Debug)]
pub enum MintFailure {
    /// `state_json` is not a state: INVALID_ARGUMENT, `invalid_argument`.
    StateJson(String),
    /// The core refused the mint.
    Core(MintError),
}

impl MintFailure {
    /// The reason name (`invalid_argument`, `lifetime_too_long` …).
    pub fn reason(&self) -> &'static str {
        match self {
            MintFailure::StateJson(_) => "invalid_argument",
            MintFailure::Core(e) => e.reason(),
        }
    }
}

impl std::fmt::Display for MintFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MintFailure::StateJson(message) => f.write_str(message),
            MintFailure::Core(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for MintFailure {}

impl From<MintError> for MintFailure {
    fn from(e: MintError) -> Self {
        MintFailure::Core(e)
    }
}

impl From<InvalidArgument> for MintFailure {
    fn from(e: InvalidArgument) -> Self {
        MintFailure::Core(e.into())
    }
}

/// The RPC error of a failed Mint, as [`mint_error_status`].
pub fn mint_failure_status(failure: &MintFailure) -> Status {
    match failure {
        MintFailure::StateJson(message) => error_status(
            tonic::Code::InvalidArgument,
            "invalid_argument",
            message.clone(),
        ),
        MintFailure::Core(e) => mint_error_status(e),
    }
}

/// The state a Mint request carries, as the CBOR value to store.
///
/// `state_json` is mapped to CBOR by the one mapping of docs/CLI.md ("JSON
/// to CBOR: the one mapping"), the command line's `--state-json`, by the
/// same function ([`state_from_json`]): object keys sorted by their UTF-8
/// bytes and never repeated; numbers written with a fraction or an exponent
/// are floats, others integers in [-2^63, 2^64 - 1]; a state nested deeper
/// than 16 levels is refused by the core (`state_encoding`). What the
/// command line refuses as a usage error is INVALID_ARGUMENT here, with the
/// same message (`state_json: not valid JSON: … at byte 1`).
pub fn state_to_cbor(
    state: Option<pb::mint_request::StateValue>,
) -> Result<ciborium::Value, MintFailure> {
    match state {
        None => Ok(ciborium::Value::Bytes(Vec::new())),
        Some(pb::mint_request::StateValue::State(bytes)) => Ok(ciborium::Value::Bytes(bytes)),
        Some(pb::mint_request::StateValue::StateJson(json)) => state_from_json(&json)
            .map_err(|e| MintFailure::StateJson(state_json_error("state_json", &e))),
    }
}

/// A verified CBOR state in the form it was minted from: bytes stay bytes,
/// anything else goes back as JSON text, the command line's JSON form of a
/// state (docs/CLI.md, "state": [`state_to_json_text`]), so that
/// `state_json` comes back as `reqstate verify` prints it. A state with no
/// JSON form (minted elsewhere: a tag, a byte string inside, a non-text or
/// repeated map key, NaN …) is handled as before the JSON form was shared:
/// serde_json's rendering of the CBOR value when it has one, else
/// `state_decoding`.
pub fn state_from_cbor(value: ciborium::Value) -> Result<pb::verify_response::StateValue, Refusal> {
    match value {
        ciborium::Value::Bytes(bytes) => Ok(pb::verify_response::StateValue::State(bytes)),
        other => state_to_json_text(&other)
            .map_or_else(|| serde_json::to_string(&other), Ok)
            .map(pb::verify_response::StateValue::StateJson)
            .map_err(|_| Refusal::StateDecoding("the state has no JSON form".into())),
    }
}

/// One Mint request against `codec`.
pub fn mint_one(
    codec: &Codec,
    request: pb::MintRequest,
    default_ttl: Duration,
) -> Result<pb::MintResponse, MintFailure> {
    let binding = Binding::with_context_bytes(&request.tool, &request.context)?;
    let state = state_to_cbor(request.state_value)?;
    let ttl = match request.ttl_seconds {
        0 => default_ttl,
        secs => Duration::from_secs(secs),
    };
    let minted = if request.single_use {
        codec.mint_single_use(binding, &request.step, &state, ttl)?
    } else {
        codec.mint(binding, &request.step, &state, ttl)?
    };
    Ok(pb::MintResponse {
        token: minted.token,
        key_id: minted.key_id.get(),
        expires_at: minted.expires_at,
        issued_at: minted.issued_at,
    })
}

/// A verified state, converted to its wire form during decoding (FORMAT.md
/// §8 step 14), so that a state with no wire form is `state_decoding`
/// before a single-use token is recorded as spent.
struct WireState(pb::verify_response::StateValue);

impl<'de> serde::Deserialize<'de> for WireState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = ciborium::Value::deserialize(deserializer)?;
        state_from_cbor(value)
            .map(WireState)
            .map_err(|_| serde::de::Error::custom("the state has no JSON form"))
    }
}

/// A Verify item after every check but the replay store's.
pub enum Checked {
    /// Verified or refused: no store involved.
    Done(Result<pb::VerifyResponse, VerifyFailure>),
    /// A single-use token that passed every other check (`consume` was
    /// set): record it, then [`finish_consume`].
    Consume(Redemption<pb::verify_response::StateValue>),
}

/// One Verify request against `codec`, up to the replay store.
pub fn check_one(codec: &Codec, request: &pb::VerifyRequest) -> Checked {
    let binding = match Binding::with_context_bytes(&request.tool, &request.context) {
        Ok(binding) => binding,
        Err(e) => return Checked::Done(Err(e.into())),
    };
    let expected = binding.expecting(request.expected_step.as_deref());
    if request.consume {
        match codec.verify_single_use::<WireState>(&request.token, expected) {
            Ok(redemption) => Checked::Consume(redemption.map_state(|s| s.0)),
            Err(refusal) => Checked::Done(Err(refusal.into())),
        }
    } else {
        Checked::Done(
            codec
                .verify::<WireState>(&request.token, expected)
                .map(|verified| verified_response(verified.map_state(|s| s.0)))
                .map_err(VerifyFailure::from),
        )
    }
}

/// The end of a consume: the store's answer decides.
pub fn finish_consume(
    redemption: Redemption<pb::verify_response::StateValue>,
    recorded: reqstate_spent_store::Recorded,
) -> Result<pb::VerifyResponse, VerifyFailure> {
    Ok(verified_response(reqstate_spent_store::finish(
        redemption, recorded,
    )?))
}

fn verified_response(verified: Verified<pb::verify_response::StateValue>) -> pb::VerifyResponse {
    pb::VerifyResponse {
        valid: true,
        reason: pb::Reason::Unspecified.into(),
        step: verified.step,
        state_value: Some(verified.state),
        key_id: verified.key_id.get(),
        issued_at: verified.issued_at,
        expires_at: verified.expires_at,
        detail: String::new(),
    }
}

/// The in-band answer for a refused token.
pub fn refused_verify_response(refusal: &Refusal) -> pb::VerifyResponse {
    not_valid(refusal.reason(), refusal.to_string())
}

fn not_valid(reason: &'static str, detail: String) -> pb::VerifyResponse {
    pb::VerifyResponse {
        valid: false,
        reason: wire_reason(reason).into(),
        detail,
        ..Default::default()
    }
}

/// A key status on the wire.
pub fn wire_status(status: reqstate::KeyStatus) -> pb::KeyStatus {
    match status {
        reqstate::KeyStatus::Primary => pb::KeyStatus::Primary,
        reqstate::KeyStatus::Active => pb::KeyStatus::Active,
        reqstate::KeyStatus::Retired => pb::KeyStatus::Retired,
    }
}

/// A key of `keyring` as ListKeys reports it at `now` (unix seconds): what
/// it does now (`status`, from its schedule), what the file says
/// (`file_status`, `mint_from`, `retire_at`), and what this sidecar did
/// with it since start (`counters`).
pub fn key_info(
    keyring: &reqstate::Keyring,
    key: &reqstate::Key,
    now: u64,
    counters: &crate::key_evidence::KeyCounters,
) -> pb::KeyInfo {
    pb::KeyInfo {
        id: key.id().get(),
        algorithm: match key.algorithm() {
            reqstate::Algorithm::HmacSha256 => pb::Algorithm::HmacSha256,
            reqstate::Algorithm::XChaCha20Poly1305 => pb::Algorithm::Xchacha20Poly1305,
            _ => pb::Algorithm::Unspecified,
        }
        .into(),
        status: wire_status(keyring.status_at(key, now)).into(),
        created_at: key.created_at(),
        file_status: wire_status(key.status()).into(),
        mint_from: key.mint_from(),
        retire_at: key.retire_at(),
        last_verified_at: counters.last_verified_at(),
        minted: counters.minted(),
        verified: counters.verified(),
    }
}

/// A scheduled transition on the wire.
pub fn wire_transition(transition: reqstate::Transition) -> pb::Transition {
    pb::Transition {
        at: transition.at,
        key_id: transition.key_id.get(),
        kind: match transition.kind {
            reqstate::TransitionKind::StartsMinting => pb::TransitionKind::StartsMinting,
            reqstate::TransitionKind::Retires => pb::TransitionKind::Retires,
            _ => pb::TransitionKind::Unspecified,
        }
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_reason_has_its_own_wire_value() {
        let mut reasons: Vec<&str> = Refusal::REASONS.to_vec();
        reasons.extend(StoreError::REASONS);
        reasons.extend([
            "invalid_argument",
            "state_encoding",
            "randomness_unavailable",
            "invalid_keyring",
        ]);
        assert!(
            reasons.contains(&"replayed") && reasons.contains(&"replay_store_unavailable"),
            "the reasons include the store's"
        );
        let mut seen = std::collections::HashSet::new();
        for reason in reasons {
            let wire = wire_reason(reason);
            assert_ne!(wire, pb::Reason::Unspecified, "{reason}");
            assert!(seen.insert(wire), "{reason} shares a wire value");
        }
        // And the reverse: every wire value but UNSPECIFIED is a core reason.
        let wire_values = (0..256)
            .filter_map(|v| pb::Reason::try_from(v).ok())
            .filter(|r| *r != pb::Reason::Unspecified)
            .count();
        assert_eq!(wire_values, seen.len());
        assert_eq!(wire_reason("no_such_reason"), pb::Reason::Unspecified);
    }

    #[test]
    fn json_state_round_trips_as_json_and_bytes_as_bytes() -> Result<(), Box<dyn std::error::Error>>
    {
        let json = state_to_cbor(Some(pb::mint_request::StateValue::StateJson(
            r#"{"amount": 5, "items": ["a", null, true, 1.5]}"#.into(),
        )))?;
        assert_eq!(
            state_from_cbor(json)?,
            pb::verify_response::StateValue::StateJson(
                r#"{"amount":5,"items":["a",null,true,1.5]}"#.into()
            )
        );
        // Keys sorted by their UTF-8 bytes, as the command line's, and
        // floats kept floats.
        let sorted = state_to_cbor(Some(pb::mint_request::StateValue::StateJson(
            r#"{"z": 1.0, "ab": [1], "a": {"y": 0, "b": -0}}"#.into(),
        )))?;
        assert_eq!(
            state_from_cbor(sorted)?,
            pb::verify_response::StateValue::StateJson(
                r#"{"a":{"b":0,"y":0},"ab":[1],"z":1.0}"#.into()
            )
        );
        let bytes = state_to_cbor(Some(pb::mint_request::StateValue::State(vec![0, 1, 2])))?;
        assert_eq!(
            state_from_cbor(bytes)?,
            pb::verify_response::StateValue::State(vec![0, 1, 2])
        );
        let refused = state_to_cbor(Some(pb::mint_request::StateValue::StateJson(
            "{nope".into(),
        )));
        let refused = refused.expect_err("{nope was accepted");
        assert_eq!(refused.reason(), "invalid_argument");
        // The command line's message, where it says where.
        let cli = state_from_json("{nope").expect_err("{nope was accepted");
        assert_eq!(refused.to_string(), state_json_error("state_json", &cli));
        assert!(refused.to_string().contains("at byte 1"), "{refused}");
        Ok(())
    }
}
