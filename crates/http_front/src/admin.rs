//! The admin door of every server: admin endpoints live on their own listener
//! (`admin_listen`, loopback by default), every mutation needs a bearer token (reads too,
//! unless `admin_reads_need_token = false`), and every mutation writes one audit line: who,
//! what, before, after.
//!
//! `/metrics` lives there too, never on a public port (it names sellers, bidders and revenue):
//! reachable by whoever reaches the admin listener, or only with the token
//! (`metrics_need_token = true`, for an admin listener on a network Prometheus shares with
//! others; Prometheus sends it with `authorization: { credentials_file: ... }`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::{Body, json_error};

/// Environment variable holding the admin token when `admin_token_file` is not set.
pub const ADMIN_TOKEN_ENV: &str = "GAVEL_ADMIN_TOKEN";

/// Admin access settings, in each server's `[security]` section.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSettings {
    /// File holding the admin token (at least 32 bytes), or set `GAVEL_ADMIN_TOKEN`. Without
    /// one, every admin mutation is refused (and reads, when they need the token).
    pub admin_token_file: Option<PathBuf>,
    /// Reads (`GET`) need the token too. Default true.
    pub admin_reads_need_token: bool,
    /// Allow `admin_listen` on a non-loopback address. Default false.
    pub admin_remote: bool,
    /// File the audit lines are appended to (JSON, one per mutation); they are logged too.
    pub audit_log: Option<PathBuf>,
    /// `GET /metrics` on the admin listener needs the admin token. Default false: whoever can
    /// reach the admin listener (loopback unless `admin_remote`) may scrape it.
    pub metrics_need_token: bool,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            admin_token_file: None,
            admin_reads_need_token: true,
            admin_remote: false,
            audit_log: None,
            metrics_need_token: false,
        }
    }
}

impl AdminSettings {
    /// Checks the settings against the server's two addresses, the same way for every server:
    /// the admin address is apart from the public one and on loopback unless asked for.
    /// Errors name the key.
    pub fn validate(
        &self,
        listen: SocketAddr,
        admin_listen: SocketAddr,
    ) -> Result<(), settings::Invalid> {
        if admin_listen == listen && listen.port() != 0 {
            return Err(settings::Invalid::new(
                "admin_listen",
                "must differ from listen: the public port never serves /admin or /metrics",
            ));
        }
        if !admin_listen.ip().is_loopback() && !self.admin_remote {
            return Err(settings::Invalid::new(
                "admin_listen",
                format!(
                    "{admin_listen} is not a loopback address; admin endpoints move money and \
                     config, so set security.admin_remote = true to serve them there on purpose"
                ),
            ));
        }
        Ok(())
    }

    /// Resolves relative paths against the configuration file's directory.
    pub fn resolve_paths(&mut self, dir: &Path) {
        for p in [&mut self.admin_token_file, &mut self.audit_log] {
            if let Some(path) = p.as_mut()
                && path.is_relative()
            {
                *path = dir.join(&*path);
            }
        }
    }
}

/// What a public port answers for `/metrics` (404): where they are instead.
pub const METRICS_ELSEWHERE: &str =
    "/metrics is served on the admin listener (admin_listen), not on this port";

/// The admin listener's `GET /metrics`: `render`ed, followed by the build and process metrics
/// every server shares ([`crate::process`]), when the door lets the scrape through
/// ([`AdminDoor::check_metrics`]); 401 or 405 otherwise.
pub fn metrics_answer<B>(
    door: &AdminDoor,
    req: &Request<B>,
    peer: SocketAddr,
    render: impl FnOnce() -> String,
) -> Response<Body> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return crate::method_not_allowed("GET");
    }
    match door.check_metrics(req, peer) {
        Ok(()) => {
            let mut page = render();
            crate::process::render(&mut page);
            crate::plain(StatusCode::OK, "text/plain; version=0.0.4", page)
        }
        Err(denied) => denied.response(),
    }
}

/// Most connections an admin listener accepts: its callers are operators and scripts.
pub const ADMIN_MAX_CONNECTIONS: u32 = 64;

/// An admin listener's limits: the server's own, with at most [`ADMIN_MAX_CONNECTIONS`].
pub fn admin_limits(mut limits: crate::Limits) -> crate::Limits {
    limits.max_connections = limits.max_connections.min(ADMIN_MAX_CONNECTIONS);
    limits
}

/// Why the admin door could not open.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Token(#[from] settings::SecretError),
    #[error("security.audit_log: cannot open {path}: {reason}")]
    Audit { path: String, reason: String },
}

/// Why an admin call was refused (401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("no admin token is configured (security.admin_token_file or GAVEL_ADMIN_TOKEN)")]
    NoTokenConfigured,
    #[error("Authorization: Bearer <admin token> required")]
    NoToken,
    #[error("wrong admin token")]
    WrongToken,
}

impl Denied {
    /// The 401 answer, with `WWW-Authenticate: Bearer`.
    pub fn response(self) -> Response<Body> {
        let mut response = json_error(StatusCode::UNAUTHORIZED, &self.to_string());
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }
}

/// Who made an admin call: the peer's address and a fingerprint of the token (never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub who: String,
}

/// Admin access for one server.
#[derive(Debug)]
pub struct AdminDoor {
    /// SHA-256 of the token: compared in constant time with the digest of what was presented.
    token_digest: Option<[u8; 32]>,
    reads_need_token: bool,
    metrics_need_token: bool,
    audit: Option<Mutex<std::fs::File>>,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl AdminDoor {
    /// Reads the token and opens the audit file.
    pub fn open(settings: &AdminSettings) -> Result<AdminDoor, AdminError> {
        let token = settings::load_secret(
            "security.admin_token_file",
            settings.admin_token_file.as_deref(),
            ADMIN_TOKEN_ENV,
        )?;
        let audit = match &settings.audit_log {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| AdminError::Audit {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    })?,
            )),
            None => None,
        };
        Ok(AdminDoor {
            token_digest: token.map(|t| digest(t.expose())),
            reads_need_token: settings.admin_reads_need_token,
            metrics_need_token: settings.metrics_need_token,
            audit,
        })
    }

    /// Whether a token is configured (without one, mutations are refused).
    pub fn has_token(&self) -> bool {
        self.token_digest.is_some()
    }

    /// Lets the request through, or says why not (answer with [`Denied::response`]).
    pub fn check<B>(&self, req: &Request<B>, peer: SocketAddr) -> Result<Caller, Denied> {
        let read = matches!(*req.method(), Method::GET | Method::HEAD);
        if read && !self.reads_need_token {
            return Ok(Caller {
                who: peer.to_string(),
            });
        }
        self.token(req, peer)
    }

    /// Lets a scrape of `/metrics` through: anyone who reached the admin listener, or only
    /// with the token when `metrics_need_token`.
    pub fn check_metrics<B>(&self, req: &Request<B>, peer: SocketAddr) -> Result<(), Denied> {
        if !self.metrics_need_token {
            return Ok(());
        }
        self.token(req, peer).map(|_| ())
    }

    /// The caller, if it presented the token.
    fn token<B>(&self, req: &Request<B>, peer: SocketAddr) -> Result<Caller, Denied> {
        let Some(expected) = self.token_digest else {
            return Err(Denied::NoTokenConfigured);
        };
        let Some(presented) = bearer_token(req.headers()) else {
            return Err(Denied::NoToken);
        };
        let got = digest(presented);
        // Constant time: every byte is compared whatever the first difference.
        let differs = got
            .iter()
            .zip(expected.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differs != 0 {
            return Err(Denied::WrongToken);
        }
        let fingerprint: String = got.iter().take(4).map(|b| format!("{b:02x}")).collect();
        Ok(Caller {
            who: format!("{peer} token:{fingerprint}"),
        })
    }

    /// Writes one audit line for a mutation: to the audit file when configured, and to the log.
    pub fn audit(
        &self,
        caller: &Caller,
        what: &str,
        before: &serde_json::Value,
        after: &serde_json::Value,
    ) {
        let line = serde_json::json!({
            "at": units::Timestamp::now().to_rfc3339(),
            "who": caller.who,
            "what": what,
            "before": before,
            "after": after,
        })
        .to_string();
        // At info, the default level: an operator's act is always in the log. As fields, so
        // that a JSON log keeps them apart.
        tracing::info!(
            target: "gavel::audit",
            who = %caller.who,
            what,
            before = %before,
            after = %after,
            "admin action"
        );
        if let Some(file) = &self.audit {
            let mut file = telemetry::locks::lock(file);
            if let Err(e) = writeln!(file, "{line}") {
                tracing::error!(error = %e, "audit line not written: {line}");
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, spaces
/// around the token ignored); `None` when the header is missing, of another scheme, or empty.
/// What both servers' admin doors and the exchange's seller check read.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes().trim_ascii();
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door(token: Option<&str>, reads_need_token: bool) -> AdminDoor {
        AdminDoor {
            token_digest: token.map(|t| digest(t.as_bytes())),
            reads_need_token,
            metrics_need_token: reads_need_token,
            audit: None,
        }
    }

    fn req(method: Method, auth: Option<&str>) -> Request<()> {
        let mut r = Request::builder().method(method).uri("/admin/x");
        if let Some(a) = auth {
            r = r.header(header::AUTHORIZATION, a);
        }
        r.body(()).unwrap_or_default()
    }

    const PEER: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5);

    #[test]
    fn mutations_need_the_right_token() {
        let d = door(Some("t0ken"), true);
        let denied = |r: Result<Caller, Denied>| r.err();
        assert_eq!(
            denied(d.check(&req(Method::POST, None), PEER)),
            Some(Denied::NoToken)
        );
        assert_eq!(
            denied(d.check(&req(Method::POST, Some("Bearer nope")), PEER)),
            Some(Denied::WrongToken)
        );
        assert_eq!(
            denied(d.check(&req(Method::POST, Some("Basic t0ken")), PEER)),
            Some(Denied::NoToken)
        );
        assert_eq!(
            Denied::WrongToken.response().status(),
            StatusCode::UNAUTHORIZED
        );
        let ok = d.check(&req(Method::POST, Some("Bearer t0ken")), PEER);
        assert!(
            ok.as_ref()
                .is_ok_and(|c| c.who.starts_with("127.0.0.1:5 token:")),
            "{:?}",
            ok.map(|c| c.who)
        );
        assert_eq!(
            denied(d.check(&req(Method::GET, None), PEER)),
            Some(Denied::NoToken)
        );
    }

    #[test]
    fn without_a_token_only_open_reads_pass() {
        let d = door(None, false);
        assert!(d.check(&req(Method::GET, None), PEER).is_ok());
        assert_eq!(
            d.check(&req(Method::POST, Some("Bearer x")), PEER).err(),
            Some(Denied::NoTokenConfigured)
        );
        let open_reads = door(Some("t"), false);
        assert!(open_reads.check(&req(Method::GET, None), PEER).is_ok());
    }

    #[test]
    fn a_public_admin_address_must_be_asked_for() {
        let public: SocketAddr = "0.0.0.0:9101".parse().unwrap_or(PEER);
        let settings = AdminSettings::default();
        let listen: SocketAddr = ([127, 0, 0, 1], 8080).into();
        let e = settings.validate(listen, public);
        assert!(e.is_err_and(|e| e.key == "admin_listen"));
        let allowed = AdminSettings {
            admin_remote: true,
            ..AdminSettings::default()
        };
        assert_eq!(allowed.validate(listen, public), Ok(()));
        assert_eq!(settings.validate(listen, PEER), Ok(()));
        let same = settings.validate(listen, listen).unwrap_err();
        assert_eq!(same.key, "admin_listen");
        assert!(
            same.problem.starts_with("must differ from listen"),
            "{same}"
        );
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        assert_eq!(
            settings.validate(any, any),
            Ok(()),
            "port 0: two ports will be drawn"
        );
    }

    #[test]
    fn metrics_need_the_token_only_when_asked() {
        let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
        let open = door(Some("secret-token"), false);
        assert_eq!(open.check_metrics(&req(Method::GET, None), peer), Ok(()));
        let guarded = door(Some("secret-token"), true);
        assert_eq!(
            guarded.check_metrics(&req(Method::GET, None), peer),
            Err(Denied::NoToken)
        );
        assert_eq!(
            guarded.check_metrics(&req(Method::GET, Some("Bearer nope")), peer),
            Err(Denied::WrongToken)
        );
        assert_eq!(
            guarded.check_metrics(&req(Method::GET, Some("Bearer secret-token")), peer),
            Ok(())
        );
        let answer = metrics_answer(&open, &req(Method::POST, None), peer, String::new);
        assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
