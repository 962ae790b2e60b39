//! `reqstate mint`, `verify` and `inspect`: the codec run locally on a keyring file, with JSON output for scripts.
//!
//! `mint` and `verify` follow the command-line contract of `docs/CLI.md`, which
//! every implementation (Rust, TypeScript, Python) shares: the same flags, the
//! same JSON on standard output, the same exit codes.

use std::io::Read as _;
use std::time::Duration;

use reqstate::{Binding, BufferedRandom, Clock, Codec, Policy, SystemClock, UntrustedToken};
use serde_json::json;

use crate::cli::{
    EXIT_BAD_CONFIG, InspectArgs, LocalCodecArgs, LocalKeyringArgs, MintArgs, VerifyArgs,
};
use crate::keyring_source::{KeyringPermissions, load_keyring_file};
use reqstate_cli_state::{encode_hex, state_from_cbor, state_from_json, state_to_json};

/// Exit code of a token refused by verify, or a mint the core refused.
const EXIT_REFUSED: u8 = 1;

/// `--now`: a clock that reads the second given on the command line.
#[derive(Debug, Clone, Copy)]
struct CommandLineClock(u64);

impl Clock for CommandLineClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// A usage or configuration error: the message goes to stderr, exit 64.
fn usage(command: &str, message: impl std::fmt::Display) -> u8 {
    eprintln!("reqstate {command}: {message}");
    EXIT_BAD_CONFIG
}

fn load_keyring(args: &LocalKeyringArgs) -> Result<reqstate::Keyring, String> {
    let permissions = if args.allow_insecure_keyring_permissions {
        KeyringPermissions::AllowGroupOrOtherReadable
    } else {
        KeyringPermissions::OwnerOnly
    };
    load_keyring_file(&args.keyring, permissions)
        .map(|loaded| loaded.keyring)
        .map_err(|e| e.to_string())
}

/// The codec, context bytes and everything else `mint` and `verify` share,
/// or the message of a usage error.
fn load_codec(args: &LocalCodecArgs) -> Result<(Codec, Vec<u8>), String> {
    let context = match (&args.context, &args.context_hex, &args.context_file) {
        (Some(text), None, None) => text.as_bytes().to_vec(),
        (None, Some(hex), None) => decode_hex(hex).map_err(|e| format!("--context-hex: {e}"))?,
        (None, None, Some(path)) => {
            std::fs::read(path).map_err(|e| format!("--context-file {}: {e}", path.display()))?
        }
        (None, None, None) => Vec::new(),
        // clap refuses two; kept for callers that build the args themselves.
        _ => {
            return Err(
                "only one of --context, --context-hex and --context-file can be used".into(),
            );
        }
    };
    let policy = Policy::new()
        .with_max_token_len(args.max_token_len)
        .map_err(|e| format!("--max-token-len {}: {e}", args.max_token_len))?
        .with_clock_leeway(Duration::from_secs(args.clock_leeway))
        .map_err(|e| format!("--clock-leeway {}: {e}", args.clock_leeway))?
        .with_max_lifetime(Duration::from_secs(args.max_lifetime))
        .map_err(|e| format!("--max-lifetime {}: {e}", args.max_lifetime))?;
    let keyring = load_keyring(&args.keys)?;
    // A schedule that retires a key while its tokens are live under this
    // policy is refused, as `serve` refuses it (docs/KEYRING.md).
    keyring.check_schedule(&policy).map_err(|e| {
        format!(
            "keyring {}: invalid keyring: {e}",
            args.keys.keyring.display()
        )
    })?;
    let codec = match args.now {
        Some(now) => Codec::with_parts(keyring, policy, CommandLineClock(now), BufferedRandom),
        None => Codec::with_parts(keyring, policy, SystemClock, BufferedRandom),
    };
    Ok((codec, context))
}

/// `reqstate mint`: prints `{"token", "key_id", "issued_at", "expires_at"}`,
/// or `{"reason", "message"}` and exits 1 when the core refuses.
pub fn mint(args: MintArgs) -> u8 {
    let state = match (&args.state_json, &args.state_cbor_hex) {
        (Some(text), None) => match state_from_json(text) {
            Ok(state) => state,
            Err(e) => return usage("mint", format!("--state-json: {e}")),
        },
        (None, Some(hex)) => match state_from_cbor_hex(hex) {
            Ok(state) => state,
            Err(e) => return usage("mint", format!("--state-cbor-hex: {e}")),
        },
        (None, None) => ciborium::Value::Null,
        (Some(_), Some(_)) => {
            return usage(
                "mint",
                "--state-json and --state-cbor-hex cannot be used together",
            );
        }
    };
    let (codec, context) = match load_codec(&args.codec) {
        Ok(loaded) => loaded,
        Err(e) => return usage("mint", e),
    };
    let ttl = Duration::from_secs(args.ttl);
    let minted = Binding::with_context_bytes(&args.codec.tool, &context)
        .map_err(reqstate::MintError::from)
        .and_then(|binding| {
            if args.single_use {
                codec.mint_single_use(binding, &args.step, &state, ttl)
            } else {
                codec.mint(binding, &args.step, &state, ttl)
            }
        });
    match minted {
        Ok(minted) => {
            println!(
                "{}",
                json!({
                    "token": minted.token,
                    "key_id": minted.key_id.get(),
                    "issued_at": minted.issued_at,
                    "expires_at": minted.expires_at,
                })
            );
            0
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "reason": e.reason(), "message": e.to_string() })
            );
            EXIT_REFUSED
        }
    }
}

/// `reqstate verify`: prints `{"valid": true, "step", "state",
/// "state_cbor_hex", "key_id", "issued_at", "expires_at"}` (`state` only when
/// the state has a JSON form), or `{"valid": false, "reason", "message"}` and
/// exits 1.
pub fn verify(args: VerifyArgs) -> u8 {
    let token = match args.token_flag.as_deref().or(args.token.as_deref()) {
        Some("-") => match read_stdin_token() {
            Ok(token) => token,
            Err(e) => return usage("verify", e),
        },
        Some(token) => token.to_string(),
        None => return usage("verify", "a token is needed: TOKEN, --token TOKEN or -"),
    };
    let (codec, context) = match load_codec(&args.codec) {
        Ok(loaded) => loaded,
        Err(e) => return usage("verify", e),
    };
    let store = match &args.replay_store {
        Some(url) => match shared_store(&args, url) {
            Ok(store) => Some(store),
            Err(e) => return usage("verify", e),
        },
        None => None,
    };
    let tool = &args.codec.tool;
    // Steps 0–13 give the state's bytes as the token carries them. There is
    // no step 14 here (docs/CLI.md: a state that verifies is printed whatever
    // it holds): the bytes are read as a self-describing CBOR value only for
    // the JSON form, and a well-formed state that value cannot hold (an
    // unassigned simple value) just has none.
    let decode = |state: Vec<u8>| -> Result<(Vec<u8>, Option<ciborium::Value>), reqstate::Refusal> {
        let value = ciborium::from_reader(&state[..]).ok();
        Ok((state, value))
    };
    let result = (|| -> Result<_, VerifyError> {
        let binding = Binding::with_context_bytes(tool, &context).map_err(reqstate::Error::from)?;
        let expected = binding.expecting(args.expected_step.as_deref());
        let verified = if args.consume {
            let redemption = codec
                .verify_single_use_raw(&token, expected)
                .map_err(reqstate::Error::from)?
                .try_map_state(decode)
                .map_err(reqstate::Error::from)?;
            match &store {
                // Spent in the shared store, by the rule of docs/SINGLE_USE.md.
                Some((runtime, replay)) => {
                    let now = redemption.now();
                    let spend = crate::replay::Spend::of(&redemption);
                    let recorded = runtime.block_on(replay.record(spend, now));
                    crate::replay::finish(redemption, recorded).map_err(VerifyError::Unspent)?
                }
                // A record for this run only (see `--consume`).
                None => redemption
                    .redeem(&reqstate::MemoryReplayStore::new(64))
                    .map_err(reqstate::Error::from)?,
            }
        } else {
            codec
                .verify_raw(&token, expected)
                .map_err(reqstate::Error::from)?
                .try_map_state(decode)
                .map_err(reqstate::Error::from)?
        };
        Ok(verified)
    })();
    match result {
        Ok(verified) => {
            let (state, value) = &verified.state;
            let mut out = json!({
                "valid": true,
                "step": verified.step,
                "state_cbor_hex": encode_hex(state),
                "key_id": verified.key_id.get(),
                "issued_at": verified.issued_at,
                "expires_at": verified.expires_at,
            });
            if let Some(state) = value.as_ref().and_then(state_to_json) {
                out["state"] = state;
            }
            println!("{out}");
            0
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "valid": false, "reason": e.reason(), "message": e.to_string() })
            );
            EXIT_REFUSED
        }
    }
}

/// `reqstate inspect`: the header fields only. No key is loaded, nothing is
/// decrypted, and nothing printed is authenticated.
pub fn inspect(args: InspectArgs) -> u8 {
    let token = if args.token == "-" {
        match read_stdin_token() {
            Ok(token) => token,
            Err(e) => return usage("inspect", e),
        }
    } else {
        args.token.trim().to_string()
    };
    let widest = Policy::new()
        .with_max_token_len(Policy::MAX_MAX_TOKEN_LEN)
        .unwrap_or_default();
    match UntrustedToken::parse(&token, &widest) {
        Ok(token) => {
            println!(
                "{}",
                json!({
                    "version": token.version(),
                    "kind": token.kind().name(),
                    "key_id": token.key_id().get(),
                    "algorithm": token.algorithm().name(),
                    "length": token.encoded_len(),
                    "decoded_bytes": token.decoded_len(),
                    "verified": false,
                })
            );
            0
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "error": e.reason(), "detail": e.to_string() })
            );
            1
        }
    }
}

/// The token on standard input, surrounding ASCII whitespace removed.
fn read_stdin_token() -> Result<String, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the token from standard input: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "the token on standard input is not UTF-8")?;
    Ok(text
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .to_string())
}

fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", text.len()));
    }
    let digit = |b: u8| -> Result<u8, String> {
        match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            _ => Err(format!("not a hex digit: {:?}", char::from(b))),
        }
    };
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// `--state-cbor-hex`: the hex, then [`state_from_cbor`].
fn state_from_cbor_hex(hex: &str) -> Result<ciborium::Value, String> {
    state_from_cbor(&decode_hex(hex)?)
}

/// Why `verify` refused a token.
enum VerifyError {
    /// A refusal or caller error of the core.
    Core(reqstate::Error),
    /// A replay, or the shared store did not record the token, and why.
    Unspent(crate::replay::Unspent),
}

impl From<reqstate::Error> for VerifyError {
    fn from(e: reqstate::Error) -> Self {
        VerifyError::Core(e)
    }
}

impl VerifyError {
    fn reason(&self) -> &'static str {
        match self {
            VerifyError::Core(e) => e.reason(),
            VerifyError::Unspent(e) => e.reason(),
        }
    }
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Core(e) => e.fmt(f),
            VerifyError::Unspent(e) => e.fmt(f),
        }
    }
}

/// The Redis store of `verify --consume --replay-store`, on a runtime of
/// its own (the command is otherwise synchronous).
fn shared_store(
    args: &VerifyArgs,
    url: &str,
) -> Result<(tokio::runtime::Runtime, crate::replay::Replay), String> {
    let config = crate::config::shared_store_config(
        url,
        false,
        &args.replay_key_prefix,
        args.replay_timeout_ms,
        args.replay_max_skew_ms,
    )
    .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime for the replay store: {e}"))?;
    let metrics = crate::metrics::Metrics::new().map_err(|e| e.to_string())?;
    let replay = {
        let _entered = runtime.enter();
        crate::replay::Replay::new(&config, std::sync::Arc::new(metrics))
            .map_err(|e| e.to_string())?
    };
    Ok((runtime, replay))
}
