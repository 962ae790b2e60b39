//! `reqstate mint`, `verify`, `consume`, `seal`, `unseal` and `inspect`: the
//! codec run locally on a keyring file, or (with `--connect`) by a running
//! sidecar through [`crate::remote`], with the same JSON output for scripts.
//!
//! `mint` and `verify` follow the command-line contract of `docs/CLI.md`, which
//! every implementation (Rust, TypeScript, Python) shares: the same flags, the
//! same JSON on standard output, the same exit codes.

use std::io::Read as _;
use std::time::Duration;

use reqstate::{Binding, BufferedRandom, Clock, Codec, Policy, SystemClock, UntrustedToken};
use serde_json::json;

use crate::cli::{
    AadArgs, ConsumeArgs, EXIT_BAD_CONFIG, InspectArgs, LocalCodecArgs, LocalKeyringArgs,
    LocalPolicyArgs, MintArgs, RemoteArgs, SealArgs, TokenArgs, UnsealArgs, VerifyArgs,
};
use crate::keyring_source::{KeyringPermissions, load_keyring_file};
use crate::output;
use reqstate_cli_state::{
    encode_hex, state_from_cbor, state_from_json, state_json_error, state_to_json,
};

/// Exit code of a token refused by verify, or a mint the core refused.
pub const EXIT_REFUSED: u8 = 1;

/// `--now`: a clock that reads the second given on the command line.
#[derive(Debug, Clone, Copy)]
struct CommandLineClock(u64);

impl Clock for CommandLineClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// A usage or configuration error: the message goes to stderr, exit 64.
pub(crate) fn usage(command: &str, message: impl std::fmt::Display) -> u8 {
    eprintln!("reqstate {command}: {message}");
    EXIT_BAD_CONFIG
}

/// The sidecar to ask, when `--connect` is given, after checking that no
/// flag of a local run came with it (and no flag of `--connect` without
/// it): the message of a usage error otherwise.
fn remote_target<'a>(
    keys: &'a LocalKeyringArgs,
    policy: &LocalPolicyArgs,
) -> Result<Option<&'a RemoteArgs>, String> {
    let remote = &keys.remote;
    if remote.connect.is_none() {
        let flag = [
            (remote.auth_token_file.is_some(), "--auth-token-file"),
            (
                remote.tls.any(),
                "--tls-ca, --tls-cert, --tls-key and --tls-server-name",
            ),
            (remote.timeout_ms.is_some(), "--timeout-ms"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name));
        return match flag {
            Some(flag) => Err(format!(
                "{flag} apply only with --connect ADDR (a running sidecar)"
            )),
            None => Ok(None),
        };
    }
    if let Some(path) = &keys.keyring {
        let from_env = std::env::var_os("REQSTATE_KEYRING").is_some();
        return Err(format!(
            "--keyring {} has no meaning with --connect: the sidecar's keys are used{}; \
             drop one of the two",
            path.display(),
            if from_env {
                " (--keyring came from REQSTATE_KEYRING)"
            } else {
                ""
            }
        ));
    }
    if keys.allow_insecure_keyring_permissions {
        return Err(
            "--allow-insecure-keyring-permissions has no meaning with --connect: \
             no keyring file is read"
                .into(),
        );
    }
    if let Some(flag) = policy.first_given() {
        return Err(format!(
            "{flag} has no meaning with --connect: the sidecar serves its own clock and policy \
             (serve --max-ttl, --clock-leeway, --max-token-len)"
        ));
    }
    Ok(Some(remote))
}

fn load_keyring(args: &LocalKeyringArgs) -> Result<reqstate::Keyring, String> {
    let Some(path) = &args.keyring else {
        return Err("--keyring FILE or --connect ADDR is needed".into());
    };
    let permissions = if args.allow_insecure_keyring_permissions {
        KeyringPermissions::AllowGroupOrOtherReadable
    } else {
        KeyringPermissions::OwnerOnly
    };
    load_keyring_file(path, permissions)
        .map(|loaded| loaded.keyring)
        .map_err(|e| e.to_string())
}

/// The context bytes of `--context`, `--context-hex` or `--context-file`.
fn context_bytes(args: &LocalCodecArgs) -> Result<Vec<u8>, String> {
    bytes_from(
        ("--context", &args.context),
        ("--context-hex", &args.context_hex),
        Some(("--context-file", &args.context_file)),
    )
}

/// The bytes of one of a text, hex or file flag (none: empty).
fn bytes_from(
    text: (&str, &Option<String>),
    hex: (&str, &Option<String>),
    file: Option<(&str, &Option<std::path::PathBuf>)>,
) -> Result<Vec<u8>, String> {
    let file = file.unwrap_or(("", &None));
    Ok(match (text.1, hex.1, file.1) {
        (Some(text), None, None) => text.as_bytes().to_vec(),
        (None, Some(digits), None) => decode_hex(digits).map_err(|e| format!("{}: {e}", hex.0))?,
        (None, None, Some(path)) => {
            std::fs::read(path).map_err(|e| format!("{} {}: {e}", file.0, path.display()))?
        }
        (None, None, None) => Vec::new(),
        // clap refuses two; kept for callers that build the args themselves.
        _ => {
            return Err(format!(
                "only one of {}, {} and {} can be used",
                text.0, hex.0, file.0
            ));
        }
    })
}

/// The codec of a local run: the keyring file, the policy and the clock.
fn local_codec(keys: &LocalKeyringArgs, args: &LocalPolicyArgs) -> Result<Codec, String> {
    let max_token_len = args.max_token_len.unwrap_or(Policy::DEFAULT_MAX_TOKEN_LEN);
    let clock_leeway = args.clock_leeway.unwrap_or(Policy::DEFAULT_CLOCK_LEEWAY);
    let max_lifetime = args.max_lifetime.unwrap_or(Policy::DEFAULT_MAX_LIFETIME);
    let policy = Policy::new()
        .with_max_token_len(max_token_len)
        .map_err(|e| format!("--max-token-len {max_token_len}: {e}"))?
        .with_clock_leeway(Duration::from_secs(clock_leeway))
        .map_err(|e| format!("--clock-leeway {clock_leeway}: {e}"))?
        .with_max_lifetime(Duration::from_secs(max_lifetime))
        .map_err(|e| format!("--max-lifetime {max_lifetime}: {e}"))?;
    let keyring = load_keyring(keys)?;
    // A schedule that retires a key while its tokens are live under this
    // policy is refused, as `serve` refuses it (docs/KEYRING.md).
    keyring.check_schedule(&policy).map_err(|e| {
        let path = keys.keyring.as_deref().unwrap_or(std::path::Path::new(""));
        format!("keyring {}: invalid keyring: {e}", path.display())
    })?;
    Ok(match args.now {
        Some(now) => Codec::with_parts(keyring, policy, CommandLineClock(now), BufferedRandom),
        None => Codec::with_parts(keyring, policy, SystemClock, BufferedRandom),
    })
}

/// The codec, context bytes and everything else `mint` and `verify` share,
/// or the message of a usage error.
fn load_codec(args: &LocalCodecArgs) -> Result<(Codec, Vec<u8>), String> {
    let context = context_bytes(args)?;
    let codec = local_codec(&args.keys, &args.policy)?;
    Ok((codec, context))
}

/// `reqstate mint`: prints `{"token", "key_id", "issued_at", "expires_at"}`,
/// or `{"reason", "message"}` and exits 1 when the core refuses.
pub fn mint(args: MintArgs) -> u8 {
    let state = match (&args.state_json, &args.state_cbor_hex) {
        (Some(text), None) => match state_from_json(text) {
            Ok(state) => state,
            Err(e) => return usage("mint", state_json_error("--state-json", &e)),
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
    match remote_target(&args.codec.keys, &args.codec.policy) {
        Err(e) => return usage("mint", e),
        Ok(Some(remote)) => {
            let context = match context_bytes(&args.codec) {
                Ok(context) => context,
                Err(e) => return usage("mint", e),
            };
            return crate::remote::mint(remote, &args, state, context);
        }
        Ok(None) => {}
    }
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
        Ok(minted) => output::line(
            json!({
                "token": minted.token,
                "key_id": minted.key_id.get(),
                "issued_at": minted.issued_at,
                "expires_at": minted.expires_at,
            }),
            0,
        ),
        Err(e) => output::line(
            json!({ "reason": e.reason(), "message": e.to_string() }),
            EXIT_REFUSED,
        ),
    }
}

/// The token of a `TOKEN`/`--token` argument (`-`: standard input).
fn token_of(args: &TokenArgs) -> Result<String, String> {
    match args.token_flag.as_deref().or(args.token.as_deref()) {
        Some("-") => read_stdin_token(),
        Some(token) => Ok(token.to_string()),
        None => Err("a token is needed: TOKEN, --token TOKEN or -".into()),
    }
}

/// `reqstate consume`: `verify --consume`; locally only with a shared
/// store (`--replay-store`), since a record that dies with the run would not
/// make the token single-use.
pub fn consume(args: ConsumeArgs) -> u8 {
    if args.codec.keys.remote.connect.is_none() && args.replay.replay_store.is_none() {
        return usage(
            "consume",
            "a local consume needs --replay-store URL (a Redis shared with the other \
             verifiers), or --connect ADDR to spend the token in a running sidecar's store; \
             `reqstate verify --consume` checks a single-use token without spending it \
             beyond this run",
        );
    }
    run_verify("consume", args.into())
}

/// `reqstate verify`: prints `{"valid": true, "step", "state",
/// "state_cbor_hex", "key_id", "issued_at", "expires_at"}` (`state` only when
/// the state has a JSON form), or `{"valid": false, "reason", "message"}` and
/// exits 1.
pub fn verify(args: VerifyArgs) -> u8 {
    run_verify("verify", args)
}

fn run_verify(command: &str, args: VerifyArgs) -> u8 {
    if args.replay.replay_store.is_some() && !args.consume {
        return usage(command, "--replay-store needs --consume");
    }
    let token = match token_of(&args.token) {
        Ok(token) => token,
        Err(e) => return usage(command, e),
    };
    match remote_target(&args.codec.keys, &args.codec.policy) {
        Err(e) => return usage(command, e),
        Ok(Some(remote)) => {
            if args.replay.replay_store.is_some() {
                return usage(
                    command,
                    "--replay-store has no meaning with --connect: the sidecar spends the \
                     token in its own store (serve --replay-store)",
                );
            }
            let context = match context_bytes(&args.codec) {
                Ok(context) => context,
                Err(e) => return usage(command, e),
            };
            return crate::remote::verify(command, remote, &args, &token, context);
        }
        Ok(None) => {}
    }
    let (codec, context) = match load_codec(&args.codec) {
        Ok(loaded) => loaded,
        Err(e) => return usage(command, e),
    };
    let store = match &args.replay.replay_store {
        Some(url) => match shared_store(&args, url) {
            Ok(store) => Some(store),
            Err(e) => return usage(command, e),
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
                    let spend = reqstate_spent_store::Spend::of(&redemption);
                    let recorded = runtime.block_on(replay.record(spend, now));
                    reqstate_spent_store::finish(redemption, recorded)
                        .map_err(|e| VerifyError::Unspent(e.for_one_run()))?
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
            output::line(out, 0)
        }
        Err(e) => output::line(
            json!({ "valid": false, "reason": e.reason(), "message": e.to_string() }),
            EXIT_REFUSED,
        ),
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
        Ok(token) => output::line(
            json!({
                "version": token.version(),
                "kind": token.kind().name(),
                "key_id": token.key_id().get(),
                "algorithm": token.algorithm().name(),
                "length": token.encoded_len(),
                "decoded_bytes": token.decoded_len(),
                "verified": false,
            }),
            0,
        ),
        Err(e) => output::line(json!({ "error": e.reason(), "detail": e.to_string() }), 1),
    }
}

/// The associated data of `--aad` or `--aad-hex`.
pub(crate) fn aad_bytes(args: &AadArgs) -> Result<Vec<u8>, String> {
    bytes_from(("--aad", &args.aad), ("--aad-hex", &args.aad_hex), None)
}

/// `reqstate seal`: prints `{"token", "key_id"}`, or `{"reason",
/// "message"}` and exits 1 when the core refuses.
pub fn seal(args: SealArgs) -> u8 {
    let payload = match bytes_from(
        ("--payload", &args.payload),
        ("--payload-hex", &args.payload_hex),
        Some(("--payload-file", &args.payload_file)),
    ) {
        Ok(payload) => payload,
        Err(e) => return usage("seal", e),
    };
    let aad = match aad_bytes(&args.aad) {
        Ok(aad) => aad,
        Err(e) => return usage("seal", e),
    };
    match remote_target(&args.keys, &args.policy) {
        Err(e) => return usage("seal", e),
        Ok(Some(remote)) => return crate::remote::seal(remote, payload, aad),
        Ok(None) => {}
    }
    let codec = match local_codec(&args.keys, &args.policy) {
        Ok(codec) => codec,
        Err(e) => return usage("seal", e),
    };
    let sealed = reqstate::Aad::new(&aad)
        .map_err(reqstate::MintError::from)
        .and_then(|aad| codec.seal(&payload, aad));
    match sealed {
        Ok(sealed) => output::line(
            json!({ "token": sealed.token, "key_id": sealed.key_id.get() }),
            0,
        ),
        Err(e) => output::line(
            json!({ "reason": e.reason(), "message": e.to_string() }),
            EXIT_REFUSED,
        ),
    }
}

/// `reqstate unseal`: prints `{"valid": true, "payload_hex", "key_id"}`, or
/// `{"valid": false, "reason", "message"}` and exits 1.
pub fn unseal(args: UnsealArgs) -> u8 {
    let token = match token_of(&args.token) {
        Ok(token) => token,
        Err(e) => return usage("unseal", e),
    };
    let aad = match aad_bytes(&args.aad) {
        Ok(aad) => aad,
        Err(e) => return usage("unseal", e),
    };
    match remote_target(&args.keys, &args.policy) {
        Err(e) => return usage("unseal", e),
        Ok(Some(remote)) => return crate::remote::unseal(remote, token, aad),
        Ok(None) => {}
    }
    let codec = match local_codec(&args.keys, &args.policy) {
        Ok(codec) => codec,
        Err(e) => return usage("unseal", e),
    };
    let unsealed = reqstate::Aad::new(&aad)
        .map_err(reqstate::Error::from)
        .and_then(|aad| codec.unseal(&token, aad).map_err(reqstate::Error::from));
    match unsealed {
        Ok(unsealed) => output::line(
            json!({
                "valid": true,
                "payload_hex": encode_hex(&unsealed.payload),
                "key_id": unsealed.key_id.get(),
            }),
            0,
        ),
        Err(e) => output::line(
            json!({ "valid": false, "reason": e.reason(), "message": e.to_string() }),
            EXIT_REFUSED,
        ),
    }
}

/// The token on standard input, surrounding ASCII whitespace removed; or the
/// `token` of the JSON object `mint` and `seal` print.
fn read_stdin_token() -> Result<String, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the token from standard input: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "the token on standard input is not UTF-8")?;
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    // `reqstate mint … | reqstate verify … -`: the JSON `mint` or `seal`
    // prints gives its token (a token itself never starts with `{`).
    if text.starts_with('{')
        && let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(text)
        && let Some(serde_json::Value::String(token)) = fields.get("token")
    {
        return Ok(token.clone());
    }
    Ok(text.to_string())
}

pub(crate) fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", text.len()));
    }
    let digit = |b: u8| -> Result<u8, String> {
        match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            _ => Err(format!(
                "not a hex digit: `{}`",
                char::from(b).escape_default()
            )),
        }
    };
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// `--state-cbor-hex`: the hex, then [`state_from_cbor`].
pub(crate) fn state_from_cbor_hex(hex: &str) -> Result<ciborium::Value, String> {
    state_from_cbor(&decode_hex(hex)?)
}

/// Why `verify` refused a token.
enum VerifyError {
    /// A refusal or caller error of the core.
    Core(reqstate::Error),
    /// A replay, or the shared store did not record the token, and why.
    Unspent(reqstate_spent_store::Unspent),
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
) -> Result<(tokio::runtime::Runtime, reqstate_spent_store::SpentStore), String> {
    let config = crate::config::shared_store_config(
        url,
        false,
        &args.replay.replay_key_prefix,
        args.replay.replay_timeout_ms,
        args.replay.replay_max_skew_ms,
    )
    .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime for the replay store: {e}"))?;
    let metrics = crate::metrics::Metrics::new().map_err(|e| e.to_string())?;
    let replay = {
        let _entered = runtime.enter();
        reqstate_spent_store::SpentStore::new(&config, std::sync::Arc::new(metrics))
            .map_err(|e| e.to_string())?
    };
    Ok((runtime, replay))
}
