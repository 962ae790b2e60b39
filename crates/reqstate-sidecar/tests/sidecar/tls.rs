//! TLS on the TCP listener against the real binary: rustls with client-certificate verification against `--client-ca`.

use crate::sidecar_process;

use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml, write_private};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, all PEM, plus a client certificate from another CA.
pub(crate) struct Pki {
    pub(crate) ca: String,
    pub(crate) server: (String, String),
    client: (String, String),
    stranger: (String, String),
}

pub(crate) fn pki() -> TestResult<Pki> {
    let make_ca = || -> TestResult<(CertificateParams, KeyPair, String)> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key)?;
        Ok((params, key, cert.pem()))
    };
    let (ca_params, ca_key, ca_pem) = make_ca()?;
    let ca = Issuer::from_params(&ca_params, &ca_key);
    let leaf =
        |names: Vec<String>, issuer: &Issuer<'_, &KeyPair>| -> TestResult<(String, String)> {
            let key = KeyPair::generate()?;
            let cert = CertificateParams::new(names)?.signed_by(&key, issuer)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
    let server = leaf(vec!["localhost".into(), "127.0.0.1".into()], &ca)?;
    let client = leaf(vec!["mcp-server".into()], &ca)?;
    let (other_params, other_key, _) = make_ca()?;
    let stranger = leaf(
        vec!["mcp-server".into()],
        &Issuer::from_params(&other_params, &other_key),
    )?;
    Ok(Pki {
        ca: ca_pem,
        server,
        client,
        stranger,
    })
}

async fn tls_client(
    sidecar: &Sidecar,
    ca: &str,
    identity: Option<&(String, String)>,
) -> TestResult<RequestStateClient<tonic::transport::Channel>> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Endpoint::from_shared(format!("https://{}", sidecar.tcp))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    Ok(RequestStateClient::new(channel))
}

#[tokio::test]
async fn tls_listener_serves_only_clients_with_a_certificate_from_the_client_ca() -> TestResult {
    let pki = pki()?;
    let dir = tempfile::tempdir()?;
    let file = |name: &str, text: &str| -> TestResult<String> {
        let path = dir.path().join(name);
        write_private(&path, text)?;
        Ok(path.display().to_string())
    };
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--tls-cert")
            .arg(file("server.pem", &pki.server.0)?)
            .arg("--tls-key")
            .arg(file("server.key", &pki.server.1)?)
            .arg("--client-ca")
            .arg(file("ca.pem", &pki.ca)?),
    )
    .await?;

    let mut client = tls_client(&sidecar, &pki.ca, Some(&pki.client)).await?;
    let keys = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
    assert_eq!(keys.keys.len(), 1);

    // No client certificate, or one from another CA: no call gets through.
    for identity in [None, Some(&pki.stranger)] {
        let refused = match tls_client(&sidecar, &pki.ca, identity).await {
            Err(_) => true,
            Ok(mut client) => client.list_keys(pb::ListKeysRequest {}).await.is_err(),
        };
        assert!(
            refused,
            "served a client with identity {:?}",
            identity.map(|_| "stranger")
        );
    }
    // Nor does plaintext on the TLS port.
    let plaintext = match sidecar_process::tcp_channel(sidecar.tcp).await {
        Err(_) => true,
        Ok(channel) => RequestStateClient::new(channel)
            .list_keys(pb::ListKeysRequest {})
            .await
            .is_err(),
    };
    assert!(plaintext, "a plaintext call was served on the TLS listener");
    Ok(())
}

/// `reqstate health` over TLS: with the CA and a client certificate the exec
/// probe passes; without the client certificate, or trusting another CA, it
/// fails with exit 1.
#[tokio::test]
async fn health_probe_speaks_mutual_tls() -> TestResult {
    let pki = pki()?;
    let dir = tempfile::tempdir()?;
    let file = |name: &str, text: &str| -> TestResult<String> {
        let path = dir.path().join(name);
        write_private(&path, text)?;
        Ok(path.display().to_string())
    };
    let ca = file("ca.pem", &pki.ca)?;
    let client_cert = file("client.pem", &pki.client.0)?;
    let client_key = file("client.key", &pki.client.1)?;
    let stranger_ca = file("stranger.pem", &pki.stranger.0)?;
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--tls-cert")
            .arg(file("server.pem", &pki.server.0)?)
            .arg("--tls-key")
            .arg(file("server.key", &pki.server.1)?)
            .arg("--client-ca")
            .arg(ca.clone()),
    )
    .await?;
    let listen = format!("tcp:{}", sidecar.tcp);
    let probe = |extra: &[&str]| -> TestResult<std::process::Output> {
        let mut args = vec!["health", "--listen", &listen];
        args.extend_from_slice(extra);
        sidecar_process::run_cli(&args)
    };

    let ok = probe(&[
        "--tls-ca",
        &ca,
        "--tls-cert",
        &client_cert,
        "--tls-key",
        &client_key,
        "--tls-server-name",
        "localhost",
    ])?;
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "SERVING\n");

    for (what, extra) in [
        ("no client certificate", vec!["--tls-ca", ca.as_str()]),
        (
            "another CA trusted",
            vec![
                "--tls-ca",
                stranger_ca.as_str(),
                "--tls-cert",
                &client_cert,
                "--tls-key",
                &client_key,
            ],
        ),
        ("plaintext", vec![]),
    ] {
        let out = probe(&extra)?;
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        assert!(out.stdout.is_empty(), "{what}: {out:?}");
    }
    Ok(())
}
