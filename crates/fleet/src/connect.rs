//! Connecting to the NATS server `[fleet]` names (token, user and password, NKey, a credentials
//! file or a client certificate; TLS with a CA) and opening its bucket.

use std::time::Duration;

use async_nats::jetstream::{self, context::Context, kv};

use crate::config::{FleetSection, TOKEN_ENV};

/// Bound on connecting, and on each request to the bucket.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// History kept per key by a bucket `gavel config push` creates: the last ten pushes.
pub const HISTORY: i64 = 10;

/// Why talking to the bucket failed; each message names the server, bucket or key.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("fleet credentials: {0}")]
    Token(String),
    #[error("NATS server {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("bucket {bucket:?}: {reason}")]
    Bucket { bucket: String, reason: String },
    #[error("key {key:?} in bucket {bucket:?}: {reason}")]
    Key {
        bucket: String,
        key: String,
        reason: String,
    },
}

/// How a connection behaves when the server is not there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// Fail now (the CLI: an operator is waiting for an answer).
    Once,
    /// Keep trying in the background for ever (a follower: NATS may come later).
    Forever,
}

/// The token `[fleet]` names: `token_file`, else [`TOKEN_ENV`], else none. Blocking (reads a
/// small file).
fn token(section: &FleetSection) -> Result<Option<String>, FleetError> {
    let secret =
        settings::load_secret("fleet.token_file", section.token_file.as_deref(), TOKEN_ENV)
            .map_err(|e| FleetError::Token(e.to_string()))?;
    secret
        .map(|s| {
            String::from_utf8(s.expose().to_vec())
                .map(|t| t.trim().to_owned())
                .map_err(|_| FleetError::Token("is not UTF-8".into()))
        })
        .transpose()
}

/// A small credential file's text, trimmed, naming `key` when it cannot be had. Blocking.
fn credential_text(key: &str, path: &std::path::Path) -> Result<String, FleetError> {
    let text = settings::read_bounded(path, settings::MAX_SECRET_BYTES)
        .map_err(|e| FleetError::Token(format!("{key}: {e}")))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(FleetError::Token(format!(
            "{key}: {} is empty",
            path.display()
        )));
    }
    if settings::readable_by_others(path) {
        eprintln!(
            "warning: {key} ({}) is readable by every user; chmod 600 it",
            path.display()
        );
    }
    Ok(text.to_owned())
}

/// `options` with the credentials `[fleet]` names (at most one set: validation checks it).
async fn with_credentials(
    mut options: async_nats::ConnectOptions,
    section: &FleetSection,
) -> Result<async_nats::ConnectOptions, FleetError> {
    if let Some(token) = token(section)? {
        options = options.token(token);
    }
    if let (Some(user), Some(file)) = (&section.user, &section.password_file) {
        let password = credential_text("fleet.password_file", file)?;
        options = options.user_and_password(user.clone(), password);
    }
    if let Some(file) = &section.nkey_seed_file {
        options = options.nkey(credential_text("fleet.nkey_seed_file", file)?);
    }
    if let Some(file) = &section.creds_file {
        options = options
            .credentials_file(file)
            .await
            .map_err(|e| FleetError::Token(format!("fleet.creds_file {}: {e}", file.display())))?;
    }
    if let (Some(cert), Some(key)) = (&section.client_cert_file, &section.client_key_file) {
        options = options
            .add_client_certificate(cert.clone(), key.clone())
            .require_tls(true);
    }
    Ok(options)
}

/// A JetStream context on the server `[fleet]` names, every request bounded by
/// [`REQUEST_TIMEOUT`].
pub async fn connect(
    section: &FleetSection,
    name: &str,
    patience: Patience,
) -> Result<Context, FleetError> {
    let options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(REQUEST_TIMEOUT)
        .request_timeout(Some(REQUEST_TIMEOUT));
    let mut options = with_credentials(options, section).await?;
    if let Some(ca) = &section.ca_file {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    if section.nats_url.starts_with("tls://") {
        options = options.require_tls(true);
    }
    if patience == Patience::Forever {
        options = options
            .retry_on_initial_connect()
            .max_reconnects(None)
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64).saturating_mul(100).min(1000))
            });
    }
    let client = options
        .connect(section.nats_url.as_str())
        .await
        .map_err(|e| FleetError::Connect {
            url: section.nats_url.clone(),
            reason: e.to_string(),
        })?;
    Ok(jetstream::ContextBuilder::new()
        .timeout(REQUEST_TIMEOUT)
        .build(client))
}

/// The bucket, which must exist.
pub async fn open(js: &Context, bucket: &str) -> Result<kv::Store, FleetError> {
    js.get_key_value(bucket)
        .await
        .map_err(|e| FleetError::Bucket {
            bucket: bucket.to_owned(),
            reason: e.to_string(),
        })
}

/// The bucket, created with [`HISTORY`] revisions per key when missing.
pub async fn open_or_create(js: &Context, bucket: &str) -> Result<kv::Store, FleetError> {
    if let Ok(store) = js.get_key_value(bucket).await {
        return Ok(store);
    }
    // The bucket's stream made directly, as a key-value bucket is defined (ADR-8, what
    // `create_key_value` builds): `create_key_value` first asks for the account's limits, and
    // async-nats 0.51 cannot read that answer from nats-server 2.9 (Debian's), while this
    // request works on every server with JetStream.
    let stream = jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        description: Some("Gavel configuration pushed to a fleet (gavel config push)".to_owned()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: HISTORY,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        num_replicas: 1,
        discard: jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    };
    let failed = |reason: String| FleetError::Bucket {
        bucket: bucket.to_owned(),
        reason,
    };
    js.create_stream(stream)
        .await
        .map_err(|e| failed(format!("cannot be created: {e}")))?;
    js.get_key_value(bucket)
        .await
        .map_err(|e| failed(format!("created, but cannot be opened: {e}")))
}
