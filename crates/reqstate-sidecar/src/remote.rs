//! `--connect`: `mint`, `verify`, `consume`, `seal`, `unseal` and `keys
//! list` asked of a running sidecar, printing the same JSON as the local
//! commands (docs/CLI.md, "Against a running sidecar") so that a script
//! switches between a keyring file and a sidecar with one flag.
//!
//! Exit codes are the local ones (0, 1 with the refusal object, 64 for a
//! usage error) plus [`EXIT_UNAVAILABLE`]: the sidecar could not be asked,
//! or refused the call itself (not the token).

use std::time::Duration;

use reqstate_cli_state::{encode_hex, state_from_json, state_to_json, state_to_json_text};
use reqstate_proto::v1 as pb;
use serde_json::json;

use crate::cli::{MintArgs, RemoteArgs, VerifyArgs};
use crate::connect::{ConnectError, Connection, Target, status_text};
use crate::local::{EXIT_REFUSED, usage};
use crate::output;
use crate::wire::REASON_METADATA_KEY;

/// `EX_UNAVAILABLE` from sysexits.h: the sidecar could not be reached in
/// time, or refused the call itself (`UNAUTHENTICATED`, `PERMISSION_DENIED`,
/// `RESOURCE_EXHAUSTED` …) rather than the token. The message is on
/// standard error; nothing is printed on standard output.
pub const EXIT_UNAVAILABLE: u8 = 69;

/// The default of `--timeout-ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 5000;

/// The connection settings of `--connect` and its flags.
pub fn target(remote: &RemoteArgs) -> Result<Target, String> {
    let address = remote.connect.clone().unwrap_or_default();
    let timeout_ms = remote.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 {
        return Err("--timeout-ms must be at least 1".into());
    }
    let mut target = Target::new(address)
        .tls(remote.tls.clone())
        .timeout(Duration::from_millis(timeout_ms))
        .insecure_send_token(remote.insecure_send_token);
    if let Some(file) = &remote.auth_token_file {
        target = target.auth_token_file(file);
    }
    Ok(target)
}

/// How a call ended: an answer, or a failed call (a gRPC status).
type Called<T> = Result<Result<T, tonic::Status>, ConnectError>;

/// Runs one call against the sidecar; `Err` is the exit code already
/// reported (a usage error, or the sidecar could not be asked).
fn call<T, F, Fut>(
    command: &str,
    remote: &RemoteArgs,
    ask: F,
) -> Result<Result<T, tonic::Status>, u8>
where
    F: FnOnce(Connection) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let target = match target(remote) {
        Ok(target) => target,
        Err(e) => return Err(usage(command, e)),
    };
    let called: Called<T> = crate::connect::block_on(&target, |c| async move { Ok(ask(c).await) });
    match called {
        Ok(answer) => Ok(answer),
        Err(e) if e.is_usage() => Err(usage(command, e)),
        Err(e) => Err(unavailable(command, e)),
    }
}

/// The sidecar could not be asked: the message, exit 69.
fn unavailable(command: &str, message: impl std::fmt::Display) -> u8 {
    eprintln!("reqstate {command}: {message}");
    EXIT_UNAVAILABLE
}

/// The core reason a failed call carries (`reqstate-reason`), when it is one
/// of the reasons of docs/CLI.md: a refusal of the request, not of the call.
fn core_reason(status: &tonic::Status) -> Option<String> {
    let reason = status.metadata().get(REASON_METADATA_KEY)?.to_str().ok()?;
    (crate::wire::wire_reason(reason) != pb::Reason::Unspecified).then(|| reason.to_owned())
}

/// The name of a wire reason (`REASON_EXPIRED` → `expired`).
fn reason_name(reason: i32) -> String {
    pb::Reason::try_from(reason)
        .map(|r| {
            r.as_str_name()
                .trim_start_matches("REASON_")
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|_| format!("unrecognized reason {reason}"))
}

/// The message of a failed call that did not refuse the token or the
/// request: the sidecar and what it said.
fn call_failed(command: &str, remote: &RemoteArgs, rpc: &str, status: &tonic::Status) -> u8 {
    let address = remote.connect.as_deref().unwrap_or_default();
    let hint = match status.code() {
        tonic::Code::Unauthenticated if remote.auth_token_file.is_none() => {
            " (the sidecar needs its bearer token: --auth-token-file FILE)"
        }
        _ => "",
    };
    unavailable(
        command,
        format!("{address}: {rpc} failed: {}{hint}", status_text(status)),
    )
}

/// The state of a Mint request, as the local command reads it: JSON as
/// given; CBOR only in a form the sidecar embeds byte for byte (a byte
/// string, or an item with a JSON form in its sorted form).
fn wire_state(
    args: &MintArgs,
    state: &ciborium::Value,
) -> Result<pb::mint_request::StateValue, String> {
    use pb::mint_request::StateValue;
    if let Some(text) = &args.state_json {
        return Ok(StateValue::StateJson(text.clone()));
    }
    if args.state_cbor_hex.is_none() {
        return Ok(StateValue::StateJson("null".into()));
    }
    if let ciborium::Value::Bytes(bytes) = state {
        return Ok(StateValue::State(bytes.clone()));
    }
    let same = state_to_json_text(state)
        .filter(|text| state_from_json(text).is_ok_and(|again| cbor(&again) == cbor(state)));
    same.map(StateValue::StateJson).ok_or_else(|| {
        "--state-cbor-hex with --connect: the sidecar takes a state as JSON or as a byte \
         string, and this item has no JSON form that gives the same bytes (a tag, a byte \
         string inside, map keys out of sorted order …); mint it with --keyring FILE"
            .to_owned()
    })
}

fn cbor(value: &ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = ciborium::into_writer(value, &mut out);
    out
}

/// `mint --connect`.
pub fn mint(remote: &RemoteArgs, args: &MintArgs, state: ciborium::Value, context: Vec<u8>) -> u8 {
    let state_value = match wire_state(args, &state) {
        Ok(state) => state,
        Err(e) => return usage("mint", e),
    };
    if args.ttl == 0 {
        // The sidecar reads 0 as its --default-ttl; the local command (and
        // the core) refuse it.
        return output::line(
            json!({
                "reason": "invalid_argument",
                "message": "invalid argument: the lifetime must be at least 1 second (--ttl 0)",
            }),
            EXIT_REFUSED,
        );
    }
    let request = pb::MintRequest {
        tool: args.codec.tool.clone(),
        step: args.step.clone(),
        state_value: Some(state_value),
        ttl_seconds: args.ttl,
        context,
        single_use: args.single_use,
    };
    let answer = match call("mint", remote, |c| async move {
        c.client().mint(c.request(request)).await
    }) {
        Ok(answer) => answer,
        Err(code) => return code,
    };
    match answer {
        Ok(minted) => {
            let minted = minted.into_inner();
            output::line(
                json!({
                    "token": minted.token,
                    "key_id": minted.key_id,
                    "issued_at": minted.issued_at,
                    "expires_at": minted.expires_at,
                }),
                0,
            )
        }
        Err(status) => match core_reason(&status) {
            Some(reason) => output::line(
                json!({ "reason": reason, "message": status.message() }),
                EXIT_REFUSED,
            ),
            None => call_failed("mint", remote, "Mint", &status),
        },
    }
}

/// The verify JSON of a verified answer (docs/CLI.md), the state mapped
/// back from the sidecar's `state_json` or `state` bytes.
fn verified_json(answer: &pb::VerifyResponse) -> Result<serde_json::Value, String> {
    let value = match &answer.state_value {
        Some(pb::verify_response::StateValue::State(bytes)) => {
            ciborium::Value::Bytes(bytes.clone())
        }
        Some(pb::verify_response::StateValue::StateJson(text)) => state_from_json(text)
            .map_err(|e| format!("the sidecar's state_json does not map back to CBOR: {e}"))?,
        None => return Err("the sidecar's answer carries no state".into()),
    };
    let mut out = json!({
        "valid": true,
        "step": answer.step,
        "state_cbor_hex": encode_hex(&cbor(&value)),
        "key_id": answer.key_id,
        "issued_at": answer.issued_at,
        "expires_at": answer.expires_at,
    });
    if let Some(state) = state_to_json(&value) {
        out["state"] = state;
    }
    Ok(out)
}

/// `verify --connect` and `consume --connect`.
pub fn verify(
    command: &str,
    remote: &RemoteArgs,
    args: &VerifyArgs,
    token: &str,
    context: Vec<u8>,
) -> u8 {
    // No policy accepts a longer token, and the sidecar could not even read
    // the request (its 4 MiB message limit answers OUT_OF_RANGE with gRPC's
    // own words): refused here as the sidecar would refuse it (issue 40
    // item 12).
    if token.len() > reqstate::Policy::MAX_MAX_TOKEN_LEN {
        return output::line(
            json!({
                "valid": false,
                "reason": "too_large",
                "message": format!(
                    "the token is {} characters, more than any policy accepts ({})",
                    token.len(),
                    reqstate::Policy::MAX_MAX_TOKEN_LEN
                ),
            }),
            EXIT_REFUSED,
        );
    }
    let request = pb::VerifyRequest {
        token: token.to_owned(),
        tool: args.codec.tool.clone(),
        expected_step: args.expected_step.clone(),
        context,
        consume: args.consume,
    };
    let answer = match call(command, remote, |c| async move {
        c.client().verify(c.request(request)).await
    }) {
        Ok(answer) => answer,
        Err(code) => return code,
    };
    match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            if !answer.valid {
                return output::line(
                    json!({
                        "valid": false,
                        "reason": reason_name(answer.reason),
                        "message": answer.detail,
                    }),
                    EXIT_REFUSED,
                );
            }
            match verified_json(&answer) {
                Ok(out) => output::line(out, 0),
                Err(e) => unavailable(command, e),
            }
        }
        Err(status) => match core_reason(&status) {
            Some(reason) => output::line(
                json!({ "valid": false, "reason": reason, "message": status.message() }),
                EXIT_REFUSED,
            ),
            None => call_failed(command, remote, "Verify", &status),
        },
    }
}

/// `seal --connect`.
pub fn seal(remote: &RemoteArgs, payload: Vec<u8>, aad: Vec<u8>) -> u8 {
    let request = pb::SealRequest { payload, aad };
    let answer = match call("seal", remote, |c| async move {
        c.client().seal(c.request(request)).await
    }) {
        Ok(answer) => answer,
        Err(code) => return code,
    };
    match answer {
        Ok(sealed) => {
            let sealed = sealed.into_inner();
            output::line(json!({ "token": sealed.token, "key_id": sealed.key_id }), 0)
        }
        Err(status) => match core_reason(&status) {
            Some(reason) => output::line(
                json!({ "reason": reason, "message": status.message() }),
                EXIT_REFUSED,
            ),
            None => call_failed("seal", remote, "Seal", &status),
        },
    }
}

/// `unseal --connect`.
pub fn unseal(remote: &RemoteArgs, token: String, aad: Vec<u8>) -> u8 {
    let request = pb::UnsealRequest { token, aad };
    let answer = match call("unseal", remote, |c| async move {
        c.client().unseal(c.request(request)).await
    }) {
        Ok(answer) => answer,
        Err(code) => return code,
    };
    match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            if answer.valid {
                output::line(
                    json!({
                        "valid": true,
                        "payload_hex": encode_hex(&answer.payload),
                        "key_id": answer.key_id,
                    }),
                    0,
                )
            } else {
                output::line(
                    json!({
                        "valid": false,
                        "reason": reason_name(answer.reason),
                        "message": answer.detail,
                    }),
                    EXIT_REFUSED,
                )
            }
        }
        Err(status) => match core_reason(&status) {
            Some(reason) => output::line(
                json!({ "valid": false, "reason": reason, "message": status.message() }),
                EXIT_REFUSED,
            ),
            None => call_failed("unseal", remote, "Unseal", &status),
        },
    }
}

/// `keys list --connect`: the sidecar's ListKeys answer.
pub fn list_keys(remote: &RemoteArgs) -> Result<pb::ListKeysResponse, ConnectError> {
    let target = target(remote).map_err(ConnectError::new)?;
    crate::connect::block_on(&target, |c| async move { c.list_keys().await })
}
