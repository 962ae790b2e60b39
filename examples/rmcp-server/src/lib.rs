//! An [`rmcp`] MCP server whose multi-round-trip `increase-counter` tool keeps
//! everything it needs between rounds in a `requestState` minted and verified
//! by [`reqstate`], linked in-process (no sidecar).
//!
//! The tool takes `{"current": N}` and runs three rounds of one `tools/call`:
//!
//! 1. no `requestState`: answer `input_required`, asking the amount by
//!    elicitation, with a token for step `amount` carrying `{current}`;
//! 2. the amount answered: verify that token, answer `input_required` again,
//!    asking for confirmation, with a token for step `confirm` carrying
//!    `{current, amount}`;
//! 3. confirmed: verify that token and return the new value as text.
//!
//! Every token is bound to the tool name and to the call context (principal,
//! audience, method and a digest of the arguments). Any verification failure
//! is an MCP error with code `-32602` (invalid params) — never a new prompt.
//!
//! rmcp's client drives the rounds itself: `RunningService::call_tool` answers
//! each elicitation through the client's `ClientHandler` and retries with the
//! echoed `requestState` (see `tests/flow.rs`). `input_required` results exist
//! only in protocol `2026-07-28`, so the client must connect with
//! `ClientLifecycleMode::Discover` (or `Auto`).

use std::sync::Arc;
use std::time::Duration;

use reqstate::{Binding, CallContext, Codec};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, Implementation, InputRequest, InputRequests,
    InputRequiredResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name. Every token is bound to it.
pub const TOOL: &str = "increase-counter";

/// How long a `requestState` token stays valid.
pub const TTL: Duration = Duration::from_secs(600);

/// The method bound into every token's call context.
const METHOD: &str = "tools/call";

/// The state carried to round 2, in the token for step `amount`.
#[derive(Serialize, Deserialize)]
struct AmountState {
    current: i64,
}

/// The state carried to round 3, in the token for step `confirm`.
#[derive(Serialize, Deserialize)]
struct ConfirmState {
    current: i64,
    amount: i64,
}

/// The MCP server: one tool, `increase-counter`, stateless between rounds.
///
/// Cheap to clone; clones share the codec. Serve it with rmcp as any
/// [`ServerHandler`]:
///
/// ```no_run
/// use reqstate::{Algorithm, Codec, Keyring, OsRandom};
/// use reqstate_example_rmcp::CounterServer;
/// use rmcp::ServiceExt;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let codec = Codec::new(Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new())?);
/// let running = CounterServer::new(codec).serve(rmcp::transport::stdio()).await?;
/// running.waiting().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct CounterServer {
    codec: Arc<Codec>,
    audience: Arc<str>,
    principal: Arc<str>,
}

impl CounterServer {
    /// The audience bound into tokens unless [`CounterServer::with_audience`]
    /// sets another: the name of this server.
    pub const DEFAULT_AUDIENCE: &'static str = "counter-server";

    /// The principal bound into tokens unless [`CounterServer::with_principal`]
    /// sets another. rmcp's request context carries no authenticated caller,
    /// and over stdio the caller is whoever started the process, so the
    /// principal is fixed on the server side.
    pub const DEFAULT_PRINCIPAL: &'static str = "stdio-client";

    /// A server that mints and verifies its `requestState` with `codec`.
    pub fn new(codec: Codec) -> Self {
        Self {
            codec: Arc::new(codec),
            audience: Arc::from(Self::DEFAULT_AUDIENCE),
            principal: Arc::from(Self::DEFAULT_PRINCIPAL),
        }
    }

    /// Binds tokens to another audience (this server's name or URL), so a
    /// token minted by another server under the same keys fails here.
    pub fn with_audience(mut self, audience: &str) -> Self {
        self.audience = Arc::from(audience);
        self
    }

    /// Binds tokens to another principal: the caller this server runs for.
    pub fn with_principal(mut self, principal: &str) -> Self {
        self.principal = Arc::from(principal);
        self
    }

    /// The `increase-counter` tool as `tools/list` describes it.
    pub fn tool() -> Tool {
        let schema = json!({
            "type": "object",
            "properties": { "current": { "type": "integer", "description": "The counter's current value" } },
            "required": ["current"]
        });
        let Value::Object(schema) = schema else {
            unreachable!("the schema literal is an object")
        };
        Tool::new(
            TOOL,
            "Increase a counter by an amount asked from the user, after confirmation",
            Arc::new(schema),
        )
    }

    /// One round of `increase-counter` for `principal`: the same code on the
    /// first call and on every retry, branching on which `requestState` and
    /// answers are present. Returns `input_required` for rounds 1 and 2, the
    /// new value for round 3, and `-32602` for any state that does not verify.
    pub fn increase_counter(
        &self,
        principal: &str,
        request: &CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // Bind every token to this caller, this server, this method and these exact arguments.
        let context = reqstate::call_context(&reqstate::Call {
            principal,
            audience: &self.audience,
            method: METHOD,
            arguments: reqstate::Arguments::Value(&arguments),
        })
        .map_err(|e| ErrorData::invalid_params(format!("arguments: {e}"), None))?;

        let Some(token) = request.request_state.as_deref() else {
            // Round 1: ask for the amount, carrying the current value.
            let current = arguments["current"]
                .as_i64()
                .ok_or_else(|| ErrorData::invalid_params("`current` must be an integer", None))?;
            let state = self.mint("amount", &AmountState { current }, &context)?;
            let message = format!("By how much should the counter ({current}) increase?");
            let schema = ElicitationSchema::builder().required_integer_property("amount", |s| s);
            return Ok(ask("amount", message, schema.build_unchecked(), state));
        };

        let answers = request.input_responses.as_ref();
        if let Some(answer) = answers.and_then(|a| a.get("amount")) {
            // Round 2: check the state first, then read the answer and ask to confirm.
            let verified = self.verify::<AmountState>(token, "amount", &context)?;
            let current = verified.current;
            let Some(amount) = accepted(answer, "amount").and_then(Value::as_i64) else {
                return Ok(done(current)); // declined: the counter stays as it was
            };
            if current.checked_add(amount).is_none() {
                return Err(ErrorData::invalid_params(
                    "the counter would overflow",
                    None,
                ));
            }
            let state = self.mint("confirm", &ConfirmState { current, amount }, &context)?;
            let message = format!("Increase {current} by {amount}?");
            let schema = ElicitationSchema::builder().required_bool_property("confirm", |s| s);
            return Ok(ask("confirm", message, schema.build_unchecked(), state));
        }

        if let Some(answer) = answers.and_then(|a| a.get("confirm")) {
            // Round 3: the amount comes from the verified state, not from this round.
            let verified = self.verify::<ConfirmState>(token, "confirm", &context)?;
            let confirmed = accepted(answer, "confirm").and_then(Value::as_bool) == Some(true);
            let value = if confirmed {
                verified.current.saturating_add(verified.amount)
            } else {
                verified.current
            };
            return Ok(done(value));
        }

        Err(ErrorData::invalid_params(
            "requestState came back without an answer to `amount` or `confirm`",
            None,
        ))
    }

    /// Mints a token for `step` carrying `state`, bound to [`TOOL`] and
    /// `context`, valid for [`TTL`].
    fn mint<T: Serialize>(
        &self,
        step: &str,
        state: &T,
        context: &CallContext,
    ) -> Result<String, ErrorData> {
        self.codec
            .mint(binding(context)?, step, state, TTL)
            .map(|minted| minted.token)
            .map_err(|e| ErrorData::internal_error(format!("cannot mint requestState: {e}"), None))
    }

    /// Verifies `token` for `step`, bound to [`TOOL`] and `context`; every
    /// failure is `-32602` with the reqstate reason (`authentication_failed`,
    /// `expired`, `wrong_step`, …).
    fn verify<T: for<'de> Deserialize<'de>>(
        &self,
        token: &str,
        step: &str,
        context: &CallContext,
    ) -> Result<T, ErrorData> {
        self.codec
            .verify::<T>(token, binding(context)?.step(step))
            .map(|verified| verified.state)
            .map_err(|e| {
                ErrorData::invalid_params(
                    format!("invalid requestState: {e}"),
                    Some(json!({ "reason": e.reason() })),
                )
            })
    }
}

/// What every token of the tool is bound to: [`TOOL`] and the call context.
/// Only fails if [`TOOL`] were not a valid tool name: a bug of this server.
fn binding(context: &CallContext) -> Result<Binding<'_>, ErrorData> {
    Binding::new(TOOL, context)
        .map_err(|e| ErrorData::internal_error(format!("cannot bind requestState: {e}"), None))
}

/// An `input_required` result asking one form elicitation under `key`.
fn ask(key: &str, message: String, schema: ElicitationSchema, state: String) -> CallToolResponse {
    let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    });
    let requests = InputRequests::from([(key.to_owned(), InputRequest::Elicitation(request))]);
    InputRequiredResult::new(Some(requests), Some(state)).into()
}

/// The field `name` of an accepted elicitation answer, `None` if declined or absent.
fn accepted<'a>(answer: &'a Value, name: &str) -> Option<&'a Value> {
    (answer["action"] == "accept").then(|| &answer["content"][name])
}

/// The final result: the counter's value as text.
fn done(value: i64) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into()
}

impl ServerHandler for CounterServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![Self::tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == TOOL).then(Self::tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        }
        self.increase_counter(&self.principal, &request)
    }
}
