//! Kept-alive GETs to the hosts named in bidders' notice URLs: win, billing and loss notices,
//! and markup fetched from a winner's `nurl`. These hosts come from bidders' answers, not from
//! the configuration, so connections are cached per host, with bounds on hosts and on idle
//! connections per host. A connection per notice would exhaust ephemeral ports within a minute
//! at a few thousand wins per second.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;

use crate::pool::{Answer, connect};

/// Notice hosts kept; past this the cache starts afresh (bounded memory).
const MAX_HOSTS: usize = 1024;
/// Idle connections kept per host.
const MAX_IDLE_PER_HOST: usize = 32;

/// Connection cache shared by the notice workers and the auction path.
#[derive(Default)]
pub struct NoticeClient {
    idle: Mutex<HashMap<String, Vec<SendRequest<Full<Bytes>>>>>,
}

impl std::fmt::Debug for NoticeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts = self.idle.lock().map_or(0, |m| m.len());
        f.debug_struct("NoticeClient")
            .field("hosts", &hosts)
            .finish()
    }
}

impl NoticeClient {
    /// GETs `url` (http only) and reads at most `max_bytes` of the answer. The caller bounds the
    /// time; dropping the future drops the connection.
    pub async fn get(&self, url: &str, max_bytes: usize) -> Result<Answer, String> {
        let uri: Uri = url.parse().map_err(|e| format!("bad notice URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err("only http:// notice URLs are supported".to_owned());
        }
        let authority = uri
            .authority()
            .ok_or("notice URL has no host")?
            .as_str()
            .to_owned();
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        if let Some(mut conn) = self.take(&authority) {
            // A cached connection may have been closed by the host since; then the request
            // never left, and one try on a fresh connection is safe.
            if let Ok(answer) = send(&mut conn, &authority, path, max_bytes).await {
                self.put(authority, conn);
                return Ok(answer);
            }
        }
        let host = uri.host().ok_or("notice URL has no host")?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let mut conn = connect((host, uri.port_u16().unwrap_or(80)))
            .await
            .map_err(|e| format!("{authority}: {e}"))?;
        let answer = send(&mut conn, &authority, path, max_bytes).await?;
        self.put(authority, conn);
        Ok(answer)
    }

    fn take(&self, authority: &str) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().ok()?;
        let conns = idle.get_mut(authority)?;
        while let Some(conn) = conns.pop() {
            if !conn.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn put(&self, authority: String, conn: SendRequest<Full<Bytes>>) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        if idle.len() >= MAX_HOSTS && !idle.contains_key(&authority) {
            idle.clear();
        }
        let conns = idle.entry(authority).or_default();
        if conns.len() < MAX_IDLE_PER_HOST {
            conns.push(conn);
        }
    }
}

async fn send(
    conn: &mut SendRequest<Full<Bytes>>,
    authority: &str,
    path: &str,
    max_bytes: usize,
) -> Result<Answer, String> {
    conn.ready().await.map_err(|e| e.to_string())?;
    let request = Request::get(path)
        .header(header::HOST, authority)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let response = conn
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), max_bytes)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer { status, body })
}
