//! `gavel config keygen|push|show` against a real `nats-server -js`, and a real `gavel
//! exchange` process following the pushed roster: `keygen` writes a private key (0600, never
//! overwritten) and its public key; invalid documents (bad TOML, a bidder with a bad URL, a
//! section that is not a list, a campaign set that fails validation, a seller key the node's
//! `[fleet]` does not allow) are refused before anything is pushed, naming the problem, exit 1;
//! a good roster is signed and pushed, the process serves its revision, and `show` prints the
//! same revision, digest, serial and signer; a roster signed with a key the node does not
//! trust is pushed but never served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use testkit::http::call_as;
use testkit::secrets::ADMIN_TOKEN;
use testkit::{NatsServer, TempDir};

/// `gavel config <args>`, run off the runtime's threads.
async fn gavel_config(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_gavel"))
            .arg("config")
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn push_args(url: &str, kind: &str, file: &Path, key: &Path) -> Vec<String> {
    vec![
        "push".into(),
        "--nats".into(),
        url.into(),
        "--kind".into(),
        kind.into(),
        "--signing-key".into(),
        key.display().to_string(),
        file.display().to_string(),
    ]
}

/// `gavel config keygen --out <dir>/<name>`: the private key's path.
async fn keygen(dir: &TempDir, name: &str) -> std::path::PathBuf {
    let key = dir.join(name);
    let out = gavel_config(vec![
        "keygen".into(),
        "--out".into(),
        key.display().to_string(),
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    key
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_documents_are_refused_and_a_good_one_reaches_a_running_exchange() {
    let nats = NatsServer::start().await;
    let url = nats.url();
    let dir = TempDir::new("config-push");
    let key = keygen(&dir, "ops.key").await;
    let public = dir.join("ops.key.pub");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the private key is the operator's alone"
        );
    }
    assert!(
        std::fs::read_to_string(&public)
            .unwrap()
            .contains("BEGIN PUBLIC KEY")
    );
    let again = gavel_config(vec![
        "keygen".into(),
        "--out".into(),
        key.display().to_string(),
    ])
    .await;
    assert_eq!(
        again.status.code(),
        Some(1),
        "an existing key is never replaced"
    );
    assert!(
        text(&again.stderr).contains("never replaced"),
        "{}",
        text(&again.stderr)
    );
    let show = |kind: &str| {
        vec![
            "show".to_owned(),
            "--nats".into(),
            url.clone(),
            "--kind".into(),
            kind.into(),
        ]
    };

    let refused = [
        (
            "exchange",
            "bad.toml",
            "[[bidders]\nname = \"b\"\n",
            "not valid TOML",
        ),
        (
            "exchange",
            "ftp.toml",
            "[[bidders]]\nname = \"b\"\nendpoint = \"ftp://127.0.0.1:9/\"\n",
            "bidders[0].endpoint",
        ),
        ("exchange", "node.toml", "node = \"elsewhere\"\n", "node"),
        (
            "bidder",
            "campaigns.json",
            r#"[{"id": "", "budget": {"total": 1}, "bid": {"cpm": 2},
                "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "x"}]}]"#,
            "campaigns[0].id",
        ),
    ];
    for (kind, name, body, named) in refused {
        let path = dir.file(name, body);
        let out = gavel_config(push_args(&url, kind, &path, &key)).await;
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("nothing pushed"), "{name}: {err}");
        assert!(err.contains(named), "{name} should name {named:?}: {err}");
    }
    // A seller whose key variable is not set here is refused as a node would refuse it.
    let unset = dir.file(
        "unset.toml",
        "[[sellers]]\nname = \"s\"\nkey_env = \"GAVEL_TEST_NEVER_SET_SELLER_KEYS\"\n",
    );
    let out = gavel_config(push_args(&url, "exchange", &unset, &key)).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("GAVEL_TEST_NEVER_SET_SELLER_KEYS"),
        "{}",
        text(&out.stderr)
    );
    // Over a node's file (`--config`): a roster without sellers is refused by a node that is
    // not open to all sellers, though it passes over the defaults.
    let closed = dir.file("closed.toml", "node = \"n1\"\n");
    let no_sellers = dir.file(
        "no-sellers.toml",
        "[[bidders]]\nname = \"b\"\nendpoint = \"http://127.0.0.1:9/\"\n",
    );
    let mut over = push_args(&url, "exchange", &no_sellers, &key);
    over.insert(1, "--config".into());
    over.insert(2, closed.display().to_string());
    let out = gavel_config(over).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("closed.toml") && err.contains("sellers"),
        "{err}"
    );
    // Over a node's file whose [fleet] allows no seller key variable: the seller is refused.
    let node_file = dir.file(
        "node.toml",
        &format!(
            "open_to_all_sellers = true\n[fleet]\nnats_url = \"{url}\"\ntrusted_keys_file = \"ops.key.pub\"\n"
        ),
    );
    let named = dir.file(
        "named.toml",
        "[[sellers]]\nname = \"s\"\nkey_env = \"PATH\"\n",
    );
    let mut over = push_args(&url, "exchange", &named, &key);
    over.insert(1, "--config".into());
    over.insert(2, node_file.display().to_string());
    let out = gavel_config(over).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sellers[0].key_env") && err.contains("allowed_key_env"),
        "{err}"
    );
    // No signing key: nothing pushed.
    let mut unsigned = push_args(&url, "exchange", &no_sellers, &dir.join("missing.key"));
    unsigned.insert(1, "--config".into());
    unsigned.insert(2, node_file.display().to_string());
    let out = gavel_config(unsigned).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--signing-key"),
        "{}",
        text(&out.stderr)
    );

    // Nothing reached the bucket: it does not even exist.
    let out = gavel_config(show("exchange")).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));

    // A real exchange process whose file names bidder `a`, following the bucket.
    let admin = testkit::secrets::admin_toml(dir.path());
    let config = dir.file(
        "exchange.toml",
        &format!(
            "{admin}open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:9/\"\n\
             [fleet]\nnats_url = \"{url}\"\nresync_ms = 200\ntrusted_keys_file = \"ops.key.pub\"\n"
        ),
    );
    let (mut child, _, admin_addr, _lines) =
        tokio::task::spawn_blocking(move || common::spawn_listening_admin("exchange", &config))
            .await
            .unwrap();

    let roster = dir.file(
        "roster.toml",
        "[[bidders]]\nname = \"b\"\nendpoint = \"http://127.0.0.1:9/\"\n",
    );
    let out = gavel_config(push_args(&url, "exchange", &roster, &key)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pushed = text(&out.stdout);
    let first = pushed.lines().next().unwrap().to_owned();
    let revision: u64 = first
        .strip_prefix("revision ")
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {pushed:?}"));
    let digest = fleet::digest(&std::fs::read(&roster).unwrap());
    assert!(first.contains(&digest), "{first}");

    testkit::time::eventually(
        Duration::from_secs(15),
        "the exchange process to serve the pushed roster",
        || async {
            let (status, body) =
                call_as(admin_addr, "GET", "/admin/bidders", Some(ADMIN_TOKEN), "").await;
            let v: Value = serde_json::from_str(&body).unwrap_or_default();
            status == 200
                && v["config"]["source"] == "nats"
                && v["config"]["revision"] == revision
                && v["bidders"][0]["name"] == "b"
        },
    )
    .await;

    let out = gavel_config(show("exchange")).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    // What push printed, and the signer unverified: `show` holds no trusted keys.
    assert_eq!(
        text(&out.stdout).lines().next(),
        Some(format!("{first} (unverified)").as_str())
    );
    assert!(
        first.contains(" serial ") && first.contains(" signer ed25519:"),
        "{first}"
    );

    // A valid roster signed by a key the node does not trust: pushed, never served.
    let stranger = keygen(&dir, "stranger.key").await;
    let other = dir.file(
        "other.toml",
        "[[bidders]]\nname = \"c\"\nendpoint = \"http://127.0.0.1:9/\"\n",
    );
    let out = gavel_config(push_args(&url, "exchange", &other, &stranger)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    testkit::time::eventually(
        Duration::from_secs(15),
        "the stranger's roster refused",
        || async {
            let (_, page) = call_as(admin_addr, "GET", "/metrics", None, "").await;
            page.contains("gavel_exchange_config_push_refused_total{reason=\"unknown_signer\"} 1")
        },
    )
    .await;
    let (_, body) = call_as(admin_addr, "GET", "/admin/bidders", Some(ADMIN_TOKEN), "").await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&v["config"]["revision"], &v["bidders"][0]["name"]),
        (&Value::from(revision), &Value::from("b"))
    );
    let _ = child.kill();
    let _ = child.wait();
}
