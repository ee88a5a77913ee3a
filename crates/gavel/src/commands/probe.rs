//! `gavel probe [URL]`: one HTTP GET, exit 0 on a 2xx answer and 1 otherwise (the status, or why
//! there was none, on stderr). A container healthcheck needs no shell, curl or wget in the image:
//! the binary probes itself. Without a URL, `/healthz` on `127.0.0.1:$GAVEL_HEALTH_PORT` (the
//! image's HEALTHCHECK, one line for whichever server the container runs). Plain `http://` only:
//! probes go to the process's own port on loopback, where TLS would prove nothing.

use std::time::Duration;

use anyhow::{Context, bail};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;

use crate::cli::ProbeArgs;
use crate::commands::Exit;

/// Longest URL taken (a probe's URL is a host, a port and a short path).
const MAX_URL_BYTES: usize = 2048;

/// The port of the default URL.
const PORT_ENV: &str = "GAVEL_HEALTH_PORT";

pub async fn run(args: &ProbeArgs) -> anyhow::Result<()> {
    let url = match &args.url {
        Some(url) => url.clone(),
        None => default_url(std::env::var(PORT_ENV).ok().as_deref())?,
    };
    let target = Target::parse(&url)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    match tokio::time::timeout(timeout, get(&target)).await {
        Ok(Ok(status)) if status.is_success() => Ok(()),
        Ok(Ok(status)) => {
            eprintln!("probe {}: answered {status}", url);
            Err(Exit(1).into())
        }
        Ok(Err(e)) => {
            eprintln!("probe {}: {e:#}", url);
            Err(Exit(1).into())
        }
        Err(_) => {
            eprintln!("probe {}: no answer within {} ms", url, args.timeout_ms);
            Err(Exit(1).into())
        }
    }
}

/// `/healthz` on loopback at the port `GAVEL_HEALTH_PORT` names.
fn default_url(port: Option<&str>) -> anyhow::Result<String> {
    let Some(port) = port else {
        bail!("give a URL, or set {PORT_ENV} to the server's public port");
    };
    let port: u16 = port
        .trim()
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .with_context(|| format!("{PORT_ENV}={port:?} is not a port"))?;
    Ok(format!("http://127.0.0.1:{port}/healthz"))
}

/// Where a probe goes: `host:port` and the path (with its query).
#[derive(Debug, PartialEq, Eq)]
struct Target {
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> anyhow::Result<Target> {
        if url.len() > MAX_URL_BYTES {
            bail!("the URL is longer than {MAX_URL_BYTES} bytes");
        }
        match url.split_once("://") {
            Some(("http", _)) => {}
            Some((other, _)) => bail!("{url}: only http:// is probed, not {other}://"),
            None => bail!("{url}: give the scheme, as in http://127.0.0.1:8080/readyz"),
        }
        let uri: http::Uri = url
            .parse()
            .with_context(|| format!("{url:?} is not a URL"))?;
        let Some(authority) = uri.authority() else {
            bail!("{url}: no host");
        };
        if authority.as_str().contains('@') {
            bail!("{url}: credentials in a probe URL are not supported");
        }
        let port = authority.port_u16().unwrap_or(80);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Target {
            authority: format!("{}:{port}", authority.host()),
            path,
        })
    }
}

async fn get(target: &Target) -> anyhow::Result<http::StatusCode> {
    let stream = tokio::net::TcpStream::connect(&target.authority)
        .await
        .with_context(|| format!("connecting to {}", target.authority))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake")?;
    tokio::spawn(conn);
    let request = http::Request::get(&target.path)
        .header(http::header::HOST, &target.authority)
        .body(Empty::<bytes::Bytes>::new())
        .context("building the request")?;
    let response = sender.send_request(request).await.context("GET")?;
    Ok(response.status())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_or_refused_by_name() {
        let t = Target::parse("http://127.0.0.1:8080/readyz").unwrap();
        assert_eq!(t.authority, "127.0.0.1:8080");
        assert_eq!(t.path, "/readyz");
        let t = Target::parse("http://localhost/healthz?x=1").unwrap();
        assert_eq!(t.authority, "localhost:80");
        assert_eq!(t.path, "/healthz?x=1");
        for (url, says) in [
            ("https://127.0.0.1:8443/readyz", "only http://"),
            ("127.0.0.1:8080/readyz", "give the scheme"),
            ("http://u:p@127.0.0.1:8080/", "credentials"),
            ("http://not a url", "not a URL"),
        ] {
            let e = format!("{:#}", Target::parse(url).unwrap_err());
            assert!(e.contains(says), "{url}: {e}");
        }
        let long = format!("http://127.0.0.1/{}", "a".repeat(MAX_URL_BYTES));
        assert!(Target::parse(&long).is_err());
    }

    #[test]
    fn the_default_url_is_healthz_on_the_health_port() {
        assert_eq!(
            default_url(Some("9100")).unwrap(),
            "http://127.0.0.1:9100/healthz"
        );
        for (port, says) in [
            (None, "set GAVEL_HEALTH_PORT"),
            (Some("0"), "is not a port"),
            (Some("http"), "is not a port"),
            (Some("70000"), "is not a port"),
        ] {
            let e = format!("{:#}", default_url(port).unwrap_err());
            assert!(e.contains(says), "{port:?}: {e}");
        }
    }
}
