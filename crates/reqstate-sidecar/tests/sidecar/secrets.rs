//! Secrets hygiene: a full session with debug logging leaves no key material,
//! bearer token, token or payload in the sidecar's logs or metrics.

use crate::misplaced_secrets;
use crate::sidecar_process;

use std::time::Duration;

use base64::Engine as _;
use reqstate_proto::v1 as pb;
use sidecar_process::{
    Sidecar, SidecarOptions, TestResult, eventually, secret, with_bearer, write_private,
};

const BEARER: &str = "bearer-7f3a9c1e5b2d8f4a6c0e";
const STATE_MARKER: &str = "state-marker-51d2";
const SEALED_MARKER: &[u8] = b"sealed-marker-93be";
const CONTEXT_MARKER: &[u8] = b"context-marker-c0ff";

fn keyring(keys: &[(u32, &str)]) -> String {
    let mut out = String::new();
    for (id, status) in keys {
        out.push_str(&format!(
            "[[key]]\nid = {id}\nstatus = \"{status}\"\nsecret = \"{}\"\n\n",
            secret(0x40 + u8::try_from(*id).unwrap_or(0))
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_logs_and_metrics_never_contain_secrets_or_tokens() -> TestResult {
    let mut sidecar = Sidecar::start(
        SidecarOptions::new(keyring(&[(1, "primary"), (2, "active")]))
            .auth_token(BEARER)
            .arg("--log")
            .arg("trace"),
    )
    .await?;
    let mut client = sidecar.unix_client().await?;
    let mut tokens = Vec::new();

    let minted = client
        .mint(with_bearer(
            pb::MintRequest {
                tool: "increase-counter".into(),
                step: "confirm".into(),
                state_value: Some(pb::mint_request::StateValue::StateJson(format!(
                    "{{\"note\":\"{STATE_MARKER}\",\"current\":10}}"
                ))),
                ttl_seconds: 600,
                context: CONTEXT_MARKER.to_vec(),
                single_use: false,
            },
            BEARER,
        )?)
        .await?
        .into_inner();
    tokens.push(minted.token.clone());
    let verified = client
        .verify(with_bearer(
            pb::VerifyRequest {
                token: minted.token.clone(),
                tool: "increase-counter".into(),
                expected_step: Some("confirm".into()),
                context: CONTEXT_MARKER.to_vec(),
                consume: false,
            },
            BEARER,
        )?)
        .await?
        .into_inner();
    assert!(verified.valid);
    // A failing verification, which is logged with its reason.
    let tampered = format!("{}A", minted.token);
    let refused = client
        .verify(with_bearer(
            pb::VerifyRequest {
                token: tampered.clone(),
                tool: "increase-counter".into(),
                expected_step: None,
                context: CONTEXT_MARKER.to_vec(),
                consume: false,
            },
            BEARER,
        )?)
        .await?
        .into_inner();
    assert!(!refused.valid);
    tokens.push(tampered);
    let sealed = client
        .seal(with_bearer(
            pb::SealRequest {
                payload: SEALED_MARKER.to_vec(),
                aad: CONTEXT_MARKER.to_vec(),
            },
            BEARER,
        )?)
        .await?
        .into_inner();
    tokens.push(sealed.token.clone());
    let unsealed = client
        .unseal(with_bearer(
            pb::UnsealRequest {
                token: sealed.token,
                aad: CONTEXT_MARKER.to_vec(),
            },
            BEARER,
        )?)
        .await?
        .into_inner();
    assert_eq!(unsealed.payload, SEALED_MARKER);
    // A refused call with a wrong bearer token.
    assert!(
        client
            .list_keys(with_bearer(pb::ListKeysRequest {}, "wrong-bearer-value")?)
            .await
            .is_err()
    );
    client
        .list_keys(with_bearer(pb::ListKeysRequest {}, BEARER)?)
        .await?;

    // A reload, then a malformed file whose broken line holds a secret.
    write_private(&sidecar.keyring, &keyring(&[(1, "active"), (2, "primary")]))?;
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    eventually(Duration::from_secs(10), "the reload", || {
        let mut c = client.clone();
        async move {
            let listed = c
                .list_keys(with_bearer(pb::ListKeysRequest {}, BEARER)?)
                .await?
                .into_inner();
            Ok((listed.keyring_generation >= 2).then_some(()))
        }
    })
    .await?;
    write_private(
        &sidecar.keyring,
        &format!(
            "[[key]]\nid = 3\nstatus = \"primary\"\nsecret = \"{}\" trailing garbage\n",
            secret(0x43)
        ),
    )?;
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    eventually(Duration::from_secs(10), "the refused reload", || {
        let s = &sidecar;
        async move {
            Ok((s.metric("reqstate_keyring_reload_failures_total").await? >= 1.0).then_some(()))
        }
    })
    .await?;
    let metrics = sidecar.metrics_text().await?;
    sidecar.signal(nix::sys::signal::Signal::SIGTERM)?;
    let status = sidecar.wait_exit(Duration::from_secs(15)).await?;
    assert!(status.success(), "{status:?}");

    let log = sidecar.log();
    assert!(
        log.lines().count() > 10,
        "trace logging produced almost nothing:\n{log}"
    );
    let mut forbidden: Vec<(String, String)> = vec![
        ("bearer token".into(), BEARER.into()),
        ("state payload".into(), STATE_MARKER.into()),
        (
            "sealed payload".into(),
            String::from_utf8_lossy(SEALED_MARKER).into(),
        ),
        (
            "context".into(),
            String::from_utf8_lossy(CONTEXT_MARKER).into(),
        ),
    ];
    for seed in [0x41u8, 0x42, 0x43] {
        forbidden.push(("secret (base64)".into(), secret(seed)));
        forbidden.push((
            "secret (base64, unpadded prefix)".into(),
            secret(seed)[..20].into(),
        ));
        forbidden.push(("secret (hex)".into(), hex::encode([seed; 32])));
        forbidden.push((
            "secret (byte list)".into(),
            format!("{seed}, {seed}, {seed}, {seed}"),
        ));
    }
    for token in &tokens {
        forbidden.push(("token".into(), token.clone()));
        // Any 24-character window of a token body would identify it.
        forbidden.push(("token fragment".into(), token[4..28].into()));
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('A'))
            .unwrap_or_default();
        if raw.len() > 20 {
            forbidden.push(("token bytes (hex)".into(), hex::encode(&raw[4..20])));
        }
    }
    for (what, needle) in &forbidden {
        assert!(
            !log.contains(needle.as_str()),
            "the log contains the {what}"
        );
        assert!(
            !metrics.contains(needle.as_str()),
            "the metrics contain the {what}"
        );
    }
    println!(
        "secrets hygiene: {} log lines and {} metrics lines searched for {} forbidden strings",
        log.lines().count(),
        metrics.lines().count(),
        forbidden.len()
    );
    Ok(())
}

/// A secret in the wrong field of the keyring (the eleven cases of
/// `tests/support/misplaced_secrets.rs`), each delivered by SIGHUP: every
/// one is refused and logged at ERROR, and the log never holds the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misplaced_secrets_in_a_reloaded_keyring_never_reach_the_log() -> TestResult {
    let mut sidecar = Sidecar::start(
        SidecarOptions::new(keyring(&[(1, "primary")]))
            .arg("--log")
            .arg("debug"),
    )
    .await?;
    let secret = misplaced_secrets::misplaced();
    let cases = misplaced_secrets::cases(&secret);
    assert_eq!(cases.len(), 11);
    for (i, (name, text)) in cases.iter().enumerate() {
        write_private(&sidecar.keyring, text)?;
        sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
        let wanted = (i + 1) as f64;
        eventually(Duration::from_secs(10), name, || {
            let s = &sidecar;
            async move {
                Ok(
                    (s.metric("reqstate_keyring_reload_failures_total").await? >= wanted)
                        .then_some(()),
                )
            }
        })
        .await?;
    }
    let metrics = sidecar.metrics_text().await?;
    assert!(
        metrics.contains("reqstate_keyring_generation 1"),
        "a misplaced secret was loaded"
    );
    sidecar.signal(nix::sys::signal::Signal::SIGTERM)?;
    sidecar.wait_exit(Duration::from_secs(15)).await?;

    let log = sidecar.log();
    let refusals = log
        .lines()
        .filter(|l| l.contains("keyring reload refused"))
        .count();
    assert!(
        refusals >= cases.len(),
        "{refusals} refusals logged:\n{log}"
    );
    let needles = misplaced_secrets::needles(&secret, &misplaced_secrets::misplaced_bytes());
    let echoed: Vec<&str> = log
        .lines()
        .filter(|l| !misplaced_secrets::found_in(l, &needles).is_empty())
        .collect();
    let found_in_metrics = misplaced_secrets::found_in(&metrics, &needles);
    println!(
        "{} misplaced secrets reloaded and refused, {refusals} refusals logged, \
         {} log lines echo the secret, {} needles searched",
        cases.len(),
        echoed.len(),
        needles.len()
    );
    assert!(
        echoed.is_empty(),
        "the log echoes the secret:\n{}",
        echoed.join("\n")
    );
    assert!(found_in_metrics.is_empty(), "the metrics echo the secret");
    Ok(())
}
