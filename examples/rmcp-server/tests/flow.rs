//! The `increase-counter` server driven by rmcp's own client, in-process over
//! a `tokio::io::duplex` pipe.
//!
//! The client connects with `server/discover` (protocol `2026-07-28`, the one
//! that has `input_required`). `RunningService::call_tool` drives the rounds
//! itself, answering each elicitation through [`Answerer`]; the attacks use
//! `call_tool_once` to retry by hand with what a client could change.

use std::sync::{Arc, Mutex};

use reqstate::{Algorithm, Codec, Keyring, OsRandom};
use reqstate_example_rmcp::{CounterServer, TOOL};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient, RunningService, ServiceError};
use rmcp::transport::IntoTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};

/// A client that answers every elicitation it is shown: `amount` with a fixed
/// amount, `confirm` with a fixed yes or no. Records the questions it saw.
#[derive(Clone)]
struct Answerer {
    amount: i64,
    confirm: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Answerer {
    fn new(amount: i64, confirm: bool) -> Self {
        Self {
            amount,
            confirm,
            asked: Arc::default(),
        }
    }
}

impl ClientHandler for Answerer {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("reqstate-flow-test", "0.0.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let fields: Vec<&String> = requested_schema.properties.keys().collect();
        let content = match fields.as_slice() {
            [f] if *f == "amount" => json!({ "amount": self.amount }),
            [f] if *f == "confirm" => json!({ "confirm": self.confirm }),
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        self.asked
            .lock()
            .expect("not poisoned")
            .push(fields[0].clone());
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
    }
}

/// Starts a server with a fresh key and connects `client` to it.
async fn connect(client: Answerer) -> RunningService<RoleClient, Answerer> {
    let codec = Codec::new(
        Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new()).expect("keyring"),
    );
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let running = CounterServer::new(codec)
            .serve(server_io)
            .await
            .expect("server starts");
        let _ = running.waiting().await;
    });
    discover(client, client_io).await
}

/// Connects `client` with `server/discover`, asking for protocol `2026-07-28`.
async fn discover<T, E, A>(client: Answerer, transport: T) -> RunningService<RoleClient, Answerer>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    client
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("client connects with server/discover")
}

fn call(current: i64) -> CallToolRequestParams {
    let Value::Object(arguments) = json!({ "current": current }) else {
        unreachable!()
    };
    CallToolRequestParams::new(TOOL).with_arguments(arguments)
}

fn text(result: &rmcp::model::CallToolResult) -> &str {
    &result.content[0].as_text().expect("text content").text
}

/// Round 1 by hand: the `input_required` result that asks the amount.
async fn first_round(client: &RunningService<RoleClient, Answerer>) -> InputRequiredResult {
    match client.call_tool_once(call(10)).await.expect("round 1") {
        CallToolResponse::InputRequired(result) => result,
        other => panic!("round 1 must ask for input, got {other:?}"),
    }
}

fn answer(key: &str, content: Value) -> InputResponses {
    InputResponses::from([(
        key.to_owned(),
        json!({ "action": "accept", "content": content }),
    )])
}

/// The `-32602` error a retry must fail with, and its reqstate reason.
fn invalid_params(outcome: Result<CallToolResponse, ServiceError>) -> String {
    match outcome {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
            error.data.expect("error data")["reason"]
                .as_str()
                .expect("a reason")
                .to_owned()
        }
        other => panic!("expected a -32602 error, got {other:?}"),
    }
}

#[tokio::test]
async fn client_driven_flow_asks_amount_then_confirmation_and_returns_new_value() {
    let answerer = Answerer::new(5, true);
    let asked = answerer.asked.clone();
    let client = connect(answerer).await;

    let result = client.call_tool(call(10)).await.expect("flow completes");

    assert_eq!(text(&result), "15");
    assert_eq!(*asked.lock().expect("not poisoned"), ["amount", "confirm"]);
    client.cancel().await.expect("client stops");
}

#[tokio::test]
async fn declined_confirmation_leaves_counter_unchanged() {
    let client = connect(Answerer::new(5, false)).await;

    let result = client.call_tool(call(10)).await.expect("flow completes");

    assert_eq!(text(&result), "10");
    client.cancel().await.expect("client stops");
}

#[tokio::test]
async fn tampered_request_state_is_rejected_with_invalid_params() {
    let client = connect(Answerer::new(5, true)).await;
    let state = first_round(&client)
        .await
        .request_state
        .expect("round 1 carries a requestState");

    // Flip one character in the middle of the token (still valid base64url).
    let mut bytes = state.clone().into_bytes();
    let i = bytes.len() / 2;
    bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).expect("ascii");
    assert_ne!(tampered, state);

    let retry = |token: String| {
        call(10)
            .with_request_state(token)
            .with_input_responses(answer("amount", json!({ "amount": 5 })))
    };
    // The untouched token goes on to the confirmation round ...
    let genuine = client.call_tool_once(retry(state)).await.expect("round 2");
    assert!(matches!(genuine, CallToolResponse::InputRequired(_)));
    // ... the tampered one is an error, not another prompt.
    let reason = invalid_params(client.call_tool_once(retry(tampered)).await);
    assert_eq!(reason, "authentication_failed");
    client.cancel().await.expect("client stops");
}

#[tokio::test]
async fn changed_arguments_on_retry_are_rejected() {
    let client = connect(Answerer::new(5, true)).await;
    let state = first_round(&client)
        .await
        .request_state
        .expect("round 1 carries a requestState");

    let retry = |current: i64| {
        call(current)
            .with_request_state(state.clone())
            .with_input_responses(answer("amount", json!({ "amount": 5 })))
    };
    // Same arguments: accepted. `current` raised from 10 to 1000: refused.
    let same = client.call_tool_once(retry(10)).await.expect("round 2");
    assert!(matches!(same, CallToolResponse::InputRequired(_)));
    let reason = invalid_params(client.call_tool_once(retry(1000)).await);
    assert_eq!(reason, "authentication_failed");
    client.cancel().await.expect("client stops");
}

#[tokio::test]
async fn amount_step_token_cannot_skip_confirmation() {
    let client = connect(Answerer::new(5, true)).await;
    let state = first_round(&client)
        .await
        .request_state
        .expect("round 1 carries a requestState");

    // Answer the confirmation straight away with the round-1 token.
    let skip = call(10)
        .with_request_state(state)
        .with_input_responses(answer("confirm", json!({ "confirm": true })));
    let reason = invalid_params(client.call_tool_once(skip).await);
    assert_eq!(reason, "wrong_step");
    client.cancel().await.expect("client stops");
}

/// Runs the flow against the stdio binary, started with `REQSTATE_KEYRING`
/// set to `keyring` (or unset), and checks that it exits once the client
/// closes its stdin.
async fn flow_through_the_binary(keyring: Option<&std::path::Path>) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_reqstate-example-rmcp"));
    match keyring {
        Some(path) => command.env("REQSTATE_KEYRING", path),
        None => command.env_remove("REQSTATE_KEYRING"),
    };
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let client = discover(Answerer::new(5, true), (stdout, stdin)).await;

    let result = client.call_tool(call(10)).await.expect("flow completes");

    assert_eq!(text(&result), "15");
    client.cancel().await.expect("client stops");
    // The client closed the server's stdin: the server exits on its own.
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn stdio_binary_serves_the_same_flow() {
    flow_through_the_binary(None).await;
}

#[tokio::test]
async fn stdio_binary_reads_the_secret_file_its_keyring_names() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().expect("a temporary directory");
    let secret = dir.path().join("key-1.b64");
    std::fs::write(&secret, "EBceJSwzOkFIT1ZdZGtyeYCHjpWco6qxuL/GzdTb4uk=\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let keyring = dir.path().join("keyring.toml");
    // A relative `secret_file`: resolved against the keyring's directory, not
    // the server's working directory.
    let toml = "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"key-1.b64\"\n";
    std::fs::write(&keyring, toml).expect("keyring");

    flow_through_the_binary(Some(&keyring)).await;

    // A secret file other users may read is refused: the server does not start.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_reqstate-example-rmcp"))
        .env("REQSTATE_KEYRING", &keyring)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("the server binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("secret_file"), "{stderr}");
    assert!(
        !stderr.contains("EBceJSwz"),
        "the error shows the secret: {stderr}"
    );
}
