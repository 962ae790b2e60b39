//! Faults the network and hostile clients bring: abrupt disconnects, garbage
//! on the TCP port, slow clients holding connections, requests far beyond the
//! size limit. The sidecar survives all of them and keeps serving others.
//! Loopback only; every loop is bounded.

use crate::sidecar_process;

use std::time::Duration;

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// One mint and verify that must succeed: the sidecar still serves.
async fn still_serves(client: &mut RequestStateClient<Channel>) -> TestResult {
    let minted = client
        .mint(pb::MintRequest {
            tool: "t".into(),
            step: "s".into(),
            state_value: Some(pb::mint_request::StateValue::StateJson("1".into())),
            ttl_seconds: 60,
            context: Vec::new(),
            single_use: false,
        })
        .await?
        .into_inner();
    let verified = client
        .verify(pb::VerifyRequest {
            token: minted.token,
            tool: "t".into(),
            expected_step: None,
            context: Vec::new(),
            consume: false,
        })
        .await?
        .into_inner();
    assert!(verified.valid, "{:?}", verified.reason());
    Ok(())
}

fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    // xorshift: reproducible garbage without a dependency.
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connections_do_not_stop_the_sidecar() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let mut good = sidecar.unix_client().await?;
    still_serves(&mut good).await?;

    // Slow clients: connections that never say anything, held throughout.
    let mut idle = Vec::new();
    for _ in 0..64 {
        idle.push(TcpStream::connect(sidecar.tcp).await?);
    }
    // A slowloris: the HTTP/2 preface one byte at a time, then silence.
    let mut slow = TcpStream::connect(sidecar.tcp).await?;
    for byte in b"PRI * HTTP/2.0\r\n" {
        slow.write_all(&[*byte]).await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Garbage: random bytes, then an abrupt close.
    for seed in 0..32u64 {
        let mut s = TcpStream::connect(sidecar.tcp).await?;
        let _ = s
            .write_all(&pseudo_random(seed, 1 + (seed as usize * 997) % 16_384))
            .await;
        drop(s);
    }
    // A valid preface followed by garbage frames.
    for seed in 0..16u64 {
        let mut s = TcpStream::connect(sidecar.tcp).await?;
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(pseudo_random(seed + 100, 4096));
        let _ = s.write_all(&bytes).await;
        drop(s);
    }
    still_serves(&mut good).await?;

    // Abrupt client disconnects mid-call: a large batch whose caller goes away.
    for _ in 0..8 {
        let mut client = sidecar.tcp_client().await?;
        let batch = pb::MintBatchRequest {
            items: vec![
                pb::MintRequest {
                    tool: "t".into(),
                    step: "s".into(),
                    state_value: Some(pb::mint_request::StateValue::StateJson("1".into())),
                    ttl_seconds: 60,
                    context: Vec::new(),
                    single_use: false,
                };
                1000
            ],
        };
        let call = tokio::spawn(async move { client.mint_batch(batch).await });
        tokio::time::sleep(Duration::from_millis(2)).await;
        call.abort();
    }

    // Far beyond the size limit (4 MiB by default): refused with a clear
    // status, and the connection's neighbours are unaffected.
    let mut big_client = sidecar.tcp_client().await?;
    let huge = big_client
        .verify(pb::VerifyRequest {
            token: "A".repeat(32 * 1024 * 1024),
            tool: "t".into(),
            expected_step: None,
            context: Vec::new(),
            consume: false,
        })
        .await;
    let status = huge.expect_err("a 32 MiB request must be refused");
    assert!(
        matches!(
            status.code(),
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
        ),
        "{status:?}"
    );

    still_serves(&mut good).await?;
    still_serves(&mut sidecar.tcp_client().await?).await?;
    let health = HealthClient::new(sidecar_process::tcp_channel(sidecar.tcp).await?)
        .clone()
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    assert_eq!(health.status, 1, "health is not SERVING");
    drop(idle);
    drop(slow);
    // The process is alive and was never restarted.
    assert!(
        sidecar.log().lines().all(|l| !l.contains("panicked")),
        "{}",
        sidecar.log()
    );
    Ok(())
}
