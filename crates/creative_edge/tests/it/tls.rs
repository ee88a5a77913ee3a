//! TLS on the edge with a certificate per server name, over real sockets, and the certificate
//! cache's reloads and evictions.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use common::{config, start_edge};
use creative_edge::SystemClock;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

struct Certs {
    dir: testkit::TempDir,
    cas: Vec<testkit::tls::TlsFiles>,
}

/// `ads.example.com`, `*.example.org` and, when asked, `default` (for `localhost`).
fn certs(with_default: bool) -> Certs {
    let dir = testkit::TempDir::new("edge-sni");
    let mut cas = vec![
        testkit::tls::generate_for(dir.path(), "ads.example.com", &["DNS:ads.example.com"]),
        testkit::tls::generate_for(dir.path(), "_wildcard.example.org", &["DNS:*.example.org"]),
    ];
    if with_default {
        cas.push(testkit::tls::generate_for(
            dir.path(),
            "default",
            &["DNS:localhost"],
        ));
    }
    Certs { dir, cas }
}

fn leaf(path: &Path) -> CertificateDer<'static> {
    CertificateDer::pem_file_iter(path)
        .expect("cert file")
        .next()
        .expect("a certificate")
        .expect("pem")
}

/// A TLS connection to the edge as `name`, trusting the test CAs.
async fn connect(
    addr: SocketAddr,
    name: &str,
    certs: &Certs,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let mut roots = RootCertStore::empty();
    for ca in &certs.cas {
        roots.add(leaf(&ca.ca)).expect("trust the test CA");
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let server_name = ServerName::try_from(name.to_owned()).expect("name");
    TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// One `Connection: close` GET over a TLS connection; the whole answer.
async fn get_over(mut tls: tokio_rustls::client::TlsStream<TcpStream>, path: &str) -> String {
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    tls.write_all(head.as_bytes()).await.expect("send");
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.expect("read");
    answer
}

/// Handshakes as `name`, asks for `/healthz`, and returns the certificate the edge sent.
async fn handshake(
    addr: SocketAddr,
    name: &str,
    certs: &Certs,
) -> Result<CertificateDer<'static>, String> {
    let tls = connect(addr, name, certs).await?;
    let sent = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first().cloned())
        .expect("peer cert")
        .into_owned();
    let answer = get_over(tls, "/healthz").await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n"),
        "{answer}"
    );
    Ok(sent)
}

/// `/metrics`, from the admin listener (plain HTTP on loopback; the TLS port serves none).
async fn admin_metrics(admin: SocketAddr) -> String {
    let page = common::get(admin, "/metrics").await;
    String::from_utf8_lossy(&page.body).into_owned()
}

fn tls_config(certs: &Certs) -> creative_edge::Config {
    let toml = format!("[tls]\ncert_dir = \"{}\"\n", certs.dir.path().display());
    config(&toml, "127.0.0.1:1".parse().expect("addr"))
}

#[tokio::test]
async fn each_server_name_gets_its_own_certificate_a_wildcard_or_the_default() {
    let certs = certs(true);
    let edge = start_edge(&tls_config(&certs), Arc::new(SystemClock)).await;
    let exact = handshake(edge.addr, "ads.example.com", &certs)
        .await
        .expect("exact name");
    assert_eq!(exact, leaf(&certs.cas[0].cert));
    let wildcard = handshake(edge.addr, "cdn.example.org", &certs)
        .await
        .expect("wildcard");
    assert_eq!(wildcard, leaf(&certs.cas[1].cert));
    let fallback = handshake(edge.addr, "localhost", &certs)
        .await
        .expect("default");
    assert_eq!(fallback, leaf(&certs.cas[2].cert));
    // The same name again comes from the cache.
    handshake(edge.addr, "ads.example.com", &certs)
        .await
        .expect("again");
    let text = admin_metrics(edge.admin).await;
    assert!(
        text.contains("gavel_edge_tls_certificate_events_total{event=\"load\"} 3"),
        "{text}"
    );
    edge.stop().await;
}

#[tokio::test]
async fn a_name_without_a_certificate_and_without_a_default_is_refused_and_counted() {
    let certs = certs(false);
    let edge = start_edge(&tls_config(&certs), Arc::new(SystemClock)).await;
    let refused = handshake(edge.addr, "unknown.example.net", &certs).await;
    assert!(refused.is_err(), "an unknown name was served");
    handshake(edge.addr, "ads.example.com", &certs)
        .await
        .expect("the known name still works");
    let text = admin_metrics(edge.admin).await;
    assert!(
        text.contains("gavel_edge_tls_certificate_events_total{event=\"unknown_name\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("gavel_edge_connections_total{outcome=\"tls_failed\"} 1"),
        "{text}"
    );
    edge.stop().await;
}

#[tokio::test]
async fn changed_files_are_reloaded_a_bad_change_keeps_the_old_certificate_and_the_cache_is_bounded()
 {
    let certs = certs(false);
    // Checked against the files at every use, so the test needs no waiting.
    let sni = http_front::SniCerts::open(certs.dir.path(), 2, Duration::ZERO).expect("dir");
    let first = sni
        .config_for(Some("ads.example.com"))
        .await
        .expect("loaded");
    let same = sni
        .config_for(Some("ads.example.com"))
        .await
        .expect("cached");
    assert!(
        Arc::ptr_eq(&first, &same),
        "unchanged files are not read again"
    );
    assert_eq!(sni.stats.loads.load(Relaxed), 1);

    // A renewed certificate (new key, new modification times) is picked up.
    testkit::tls::generate_for(
        certs.dir.path(),
        "ads.example.com",
        &["DNS:ads.example.com"],
    );
    let renewed = sni
        .config_for(Some("ads.example.com"))
        .await
        .expect("renewed");
    assert!(!Arc::ptr_eq(&first, &renewed));
    assert_eq!(sni.stats.reloads.load(Relaxed), 1);

    // A half-written renewal is refused; the last good certificate keeps serving.
    std::fs::write(
        certs.dir.join("ads.example.com.crt"),
        "-----BEGIN CERTIFICATE-----\ngarbage",
    )
    .expect("break it");
    let kept = sni
        .config_for(Some("ads.example.com"))
        .await
        .expect("still served");
    assert!(Arc::ptr_eq(&renewed, &kept));
    assert_eq!(sni.stats.reload_failures.load(Relaxed), 1);

    // Two names at most: the wildcard lookup remembers `x.example.org` as absent and loads
    // `_wildcard.example.org`, pushing `ads.example.com` out.
    sni.config_for(Some("x.example.org"))
        .await
        .expect("wildcard");
    assert!(sni.cached() <= 2);
    assert!(sni.stats.evictions.load(Relaxed) >= 1);
    // Names that cannot be file names are never looked up.
    assert!(sni.config_for(Some("../../etc/passwd")).await.is_none());
}
