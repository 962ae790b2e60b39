//! The stateless `increase-counter` tool of an MCP server, with only the `reqstate` crate:
//! ask the amount → ask for confirmation → return the new value.
//!
//! One re-entrant handler serves every round; everything it needs between
//! rounds travels in `requestState`, which the "client" here echoes back.
//!
//! ```text
//! cargo run -p reqstate --example increase_counter
//! ```

use std::time::Duration;

use reqstate::{Algorithm, Binding, Codec, Keyring, OsRandom};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const TOOL: &str = "increase-counter";
const TTL: Duration = Duration::from_secs(600);

#[derive(Serialize, Deserialize)]
struct AmountState {
    current: i64,
}

#[derive(Serialize, Deserialize)]
struct ConfirmState {
    current: i64,
    amount: i64,
}

/// The tool handler: the same code on the first call and on every retry,
/// branching on which state and answers are present.
fn handle(codec: &Codec, principal: &str, params: &Value) -> Result<Value, reqstate::Error> {
    let arguments = &params["arguments"];
    // Bind every token to this caller, this server and these exact arguments.
    let context = reqstate::call_context(&reqstate::Call {
        principal,
        audience: "counter-server",
        method: "tools/call",
        arguments: reqstate::Arguments::Value(arguments),
    })?;
    let binding = Binding::new(TOOL, &context)?;
    let current = arguments["current"].as_i64().unwrap_or(0);
    let answers = &params["inputResponses"];

    let Some(token) = params["requestState"].as_str() else {
        // Round 1: ask for the amount, carrying the current value.
        let minted = codec.mint(binding, "amount", &AmountState { current }, TTL)?;
        return Ok(input_required(
            "amount",
            "By how much should the counter increase?",
            "number",
            minted.token,
        ));
    };

    if let Some(amount) = answers["amount"]["content"]["amount"].as_i64() {
        // Round 2: the amount arrived; check the state, then ask to confirm.
        let v = codec.verify::<AmountState>(token, binding.step("amount"))?;
        let next = ConfirmState {
            current: v.state.current,
            amount,
        };
        let message = format!("Increase {} by {amount}?", next.current);
        let minted = codec.mint(binding, "confirm", &next, TTL)?;
        return Ok(input_required("confirm", &message, "boolean", minted.token));
    }

    // Round 3: the confirmation arrived; the amount comes from the verified state,
    // not from anything the client sent in this round.
    let v = codec.verify::<ConfirmState>(token, binding.step("confirm"))?;
    let confirmed = answers["confirm"]["content"]["confirm"].as_bool() == Some(true);
    let text = if confirmed {
        format!("Counter is now {}", v.state.current + v.state.amount)
    } else {
        format!("Cancelled; counter stays at {}", v.state.current)
    };
    Ok(json!({ "content": [{ "type": "text", "text": text }] }))
}

fn input_required(name: &str, message: &str, kind: &str, state: String) -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {
            name: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": message,
                    "requestedSchema": {
                        "type": "object",
                        "properties": { name: { "type": kind } },
                        "required": [name]
                    }
                }
            }
        },
        "requestState": state
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One fresh random key that lives as long as this run. A server serves a
    // keyring file instead, with its checks and reloads:
    // `reqstate_keyring_file::KeyringFile::open("keyring.toml")?`, then
    // `handle(&keys.current(), …)` per request (examples/key-rotation).
    let codec = Codec::new(Keyring::ephemeral(
        Algorithm::XChaCha20Poly1305,
        &OsRandom::new(),
    )?);
    let call = json!({ "name": TOOL, "arguments": { "current": 10 } });

    println!("round 1: tools/call {call}");
    let r1 = handle(&codec, "user-42", &call)?;
    let s1 = r1["requestState"].as_str().unwrap_or_default().to_owned();
    println!(
        "  -> input_required amount; requestState ({} chars): {s1}",
        s1.len()
    );

    let mut retry = call.clone();
    retry["requestState"] = json!(s1);
    retry["inputResponses"] =
        json!({ "amount": { "action": "accept", "content": { "amount": 5 } } });
    println!("round 2: retry with amount 5");
    let r2 = handle(&codec, "user-42", &retry)?;
    let s2 = r2["requestState"].as_str().unwrap_or_default().to_owned();
    println!(
        "  -> input_required confirm; requestState ({} chars): {s2}",
        s2.len()
    );

    let mut confirm = call.clone();
    confirm["requestState"] = json!(s2);
    confirm["inputResponses"] =
        json!({ "confirm": { "action": "accept", "content": { "confirm": true } } });
    println!("round 3: retry with confirmation");
    let r3 = handle(&codec, "user-42", &confirm)?;
    println!("  -> {}", r3["content"][0]["text"]);

    // What an attacker gets for changing the state, the arguments, or the caller.
    let mut tampered = confirm.clone();
    tampered["requestState"] = json!(format!("{s2}-TAMPERED"));
    println!(
        "tampered state:     {}",
        handle(&codec, "user-42", &tampered).unwrap_err()
    );
    let mut other_args = confirm.clone();
    other_args["arguments"]["current"] = json!(1000);
    println!(
        "changed arguments:  {}",
        handle(&codec, "user-42", &other_args).unwrap_err()
    );
    println!(
        "another principal:  {}",
        handle(&codec, "user-43", &confirm).unwrap_err()
    );
    Ok(())
}
