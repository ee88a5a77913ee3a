//! The follower and the push against a real `nats-server -js`: every signed revision reaches
//! every follower once and in order; a follower started while NATS is down catches up when it
//! comes; a NATS restart with the same store loses no later push; and nothing but a document
//! signed by a trusted key for this bucket and key, newer than the last, is ever taken: an
//! unsigned publish, a stranger's key, a tampered document, an older document put again and a
//! deletion are all handed over as refused, and a restarted follower takes the newest signed
//! document from the key's history. NATS with credentials: a token, a user and password, an
//! NKey; a raw publish without them is refused by the server itself.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleet::signed::{self, Place};
use fleet::{Change, FleetSection, Pushed, SigningKey, follow, push, show};
use testkit::nats::publish_raw;
use testkit::{NatsServer, TempDir};

const KEY: &str = "test.key";

/// A server stand-in: what it was offered, in order.
#[derive(Default)]
struct Node {
    offered: Mutex<Vec<Change>>,
}

impl Node {
    fn revisions(&self) -> Vec<u64> {
        self.offered
            .lock()
            .unwrap()
            .iter()
            .map(Change::revision)
            .collect()
    }
    fn last(&self) -> Option<Change> {
        self.offered.lock().unwrap().last().cloned()
    }
    /// The documents taken, in order.
    fn taken(&self) -> Vec<String> {
        self.offered
            .lock()
            .unwrap()
            .iter()
            .filter_map(|c| match c {
                Change::Put(p) => Some(String::from_utf8_lossy(&p.value).into_owned()),
                Change::Refused { .. } => None,
            })
            .collect()
    }
}

fn start(section: &FleetSection) -> Arc<Node> {
    let node = Arc::new(Node::default());
    follow(
        Arc::downgrade(&node),
        section.clone(),
        KEY.into(),
        "fleet-test",
        |node: Arc<Node>, change| async move {
            node.offered.lock().unwrap().push(change);
        },
    );
    node
}

/// Waits (at most 15 s) until every node's last change is `revision`.
async fn converge(nodes: &[Arc<Node>], revision: u64) {
    let until = Instant::now() + Duration::from_secs(15);
    while nodes
        .iter()
        .any(|n| n.last().map(|c| c.revision()) != Some(revision))
    {
        assert!(
            Instant::now() < until,
            "nodes did not reach revision {revision}: {:?}",
            nodes.iter().map(|n| n.revisions()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `node`'s last change is a refusal with this metric label; the change.
async fn refused(node: &Node, reason: &str) -> Change {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(change) = node.last()
            && matches!(&change, Change::Refused { refusal, .. } if refusal.reason().label() == reason)
        {
            return change;
        }
        assert!(
            Instant::now() < until,
            "no {reason} refusal: last {:?}",
            node.last()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An operator key, and a directory holding `trusted.pub` with its public key.
fn operator() -> (SigningKey, TempDir) {
    let (key, _) = SigningKey::generate().unwrap();
    let dir = TempDir::new("fleet-keys");
    dir.file("trusted.pub", &key.public_pem());
    (key, dir)
}

fn section(url: String, keys: &TempDir) -> FleetSection {
    FleetSection {
        resync_ms: 200,
        trusted_keys_file: Some(keys.join("trusted.pub")),
        ..FleetSection::new(url)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_reach_every_follower_once_in_order() {
    let nats = NatsServer::start().await;
    let (key, keys) = operator();
    let s = section(nats.url(), &keys);
    assert!(show(&s, KEY).await.is_err(), "no bucket yet");
    let first = push(&s, KEY, b"one", &key).await.unwrap();
    let nodes: Vec<_> = (0..3).map(|_| start(&s)).collect();
    converge(&nodes, first.revision).await;
    let second = push(&s, KEY, b"two", &key).await.unwrap();
    let third = push(&s, KEY, b"three", &key).await.unwrap();
    assert!(first.revision < second.revision && second.revision < third.revision);
    assert!(first.serial < second.serial && second.serial < third.serial);
    converge(&nodes, third.revision).await;
    for node in &nodes {
        let seen = node.revisions();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "in order, once: {seen:?}"
        );
        assert_eq!(
            node.last(),
            Some(Change::Put(Pushed {
                revision: third.revision,
                serial: third.serial,
                signer: key.id().to_owned(),
                value: bytes::Bytes::from_static(b"three")
            }))
        );
    }
    let shown = show(&s, KEY).await.unwrap().unwrap();
    assert_eq!(shown.revision, third.revision);
    assert_eq!(shown.digest, Some(fleet::digest(b"three")));
    assert_eq!(shown.bytes, 5);
    assert_eq!(shown.signed, Some((third.serial, key.id().to_owned())));
    // A key that was never put shows nothing; a document past the limit is refused before
    // it travels.
    assert_eq!(show(&s, "other.key").await.unwrap(), None);
    let huge = vec![b'x'; fleet::MAX_DOCUMENT_BYTES + 1];
    let e = push(&s, KEY, &huge, &key).await.unwrap_err().to_string();
    assert!(e.contains("at most"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_outlives_nats_and_starts_without_it() {
    let mut nats = NatsServer::start().await;
    let (key, keys) = operator();
    let s = section(nats.url(), &keys);
    let first = push(&s, KEY, b"one", &key).await.unwrap().revision;
    let early = start(&s);
    converge(std::slice::from_ref(&early), first).await;
    nats.kill();
    // Started while NATS is down: nothing to apply, no error to the node.
    let late = start(&s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(late.last(), None);
    nats.restart().await;
    converge(&[early.clone(), late.clone()], first).await;
    let second = push(&s, KEY, b"two", &key).await.unwrap().revision;
    converge(&[early.clone(), late.clone()], second).await;
    // A delete is signed by nobody: refused, and "two" stays the last document taken.
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let store = js.get_key_value("gavel-config").await.unwrap();
    store.delete(KEY).await.unwrap();
    refused(&early, "removed").await;
    assert_eq!(early.taken(), ["one", "two"]);
    assert_eq!(
        early.revisions().iter().filter(|r| **r == second).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_signed_newer_documents_for_this_key_are_taken() {
    let nats = NatsServer::start().await;
    let (key, keys) = operator();
    let s = section(nats.url(), &keys);
    let subject = format!("$KV.{}.{KEY}", s.bucket);
    let here = Place {
        bucket: &s.bucket,
        key: KEY,
    };
    let good = push(&s, KEY, b"roster v1", &key).await.unwrap();
    let node = start(&s);
    converge(std::slice::from_ref(&node), good.revision).await;
    let old_value = signed::seal(
        &key,
        here,
        good.serial,
        "2026-11-28T10:00:00Z",
        b"roster v1",
    )
    .unwrap();
    let newer = push(&s, KEY, b"roster v2", &key).await.unwrap();
    converge(std::slice::from_ref(&node), newer.revision).await;

    // An unsigned document, published raw with no credentials (what an attacker on the
    // network can do to a NATS without authorization).
    let evil = b"[[bidders]]\nname = \"a\"\nendpoint = \"http://attacker.example/\"\n";
    publish_raw(nats.port, "{}", &subject, evil).await.unwrap();
    refused(&node, "unsigned").await;
    // Signed by a key the node does not trust.
    let (stranger, _) = SigningKey::generate().unwrap();
    let strange = signed::seal(&stranger, here, u64::MAX - 1, "t", evil).unwrap();
    publish_raw(nats.port, "{}", &subject, &strange)
        .await
        .unwrap();
    refused(&node, "unknown_signer").await;
    // The trusted key's document with its text changed, serial raised.
    let mut tampered = signed::envelope(&old_value).unwrap();
    tampered.document = String::from_utf8_lossy(evil).into_owned();
    tampered.serial = u64::MAX - 1;
    let tampered = serde_json::to_vec(&tampered).unwrap();
    publish_raw(nats.port, "{}", &subject, &tampered)
        .await
        .unwrap();
    refused(&node, "bad_signature").await;
    // The first document, signed and intact, put again: older than the one taken.
    publish_raw(nats.port, "{}", &subject, &old_value)
        .await
        .unwrap();
    let stale = refused(&node, "stale").await;
    assert!(
        matches!(&stale, Change::Refused { refusal: fleet::Refusal::Stale { serial, newest }, .. }
            if *serial == good.serial && *newest == newer.serial),
        "{stale:?}"
    );
    // A document signed for another key of the bucket.
    let other = signed::seal(
        &key,
        Place {
            key: "other.key",
            ..here
        },
        u64::MAX - 1,
        "t",
        evil,
    )
    .unwrap();
    publish_raw(nats.port, "{}", &subject, &other)
        .await
        .unwrap();
    refused(&node, "wrong_key").await;
    // Signed with the trusted key, but an hour in the future (a stolen key or a wrong clock):
    // taking it would make every later push look stale.
    let hour_ahead = units::Timestamp::now().millis() + 3_600_000;
    let ahead = signed::seal(&key, here, hour_ahead, "t", b"roster from the future").unwrap();
    publish_raw(nats.port, "{}", &subject, &ahead)
        .await
        .unwrap();
    refused(&node, "ahead").await;
    assert_eq!(node.taken(), ["roster v1", "roster v2"], "no forgery taken");

    // A node started now finds a forgery as the latest revision: it counts the refusal and
    // takes the newest signed document of the key's history.
    let restarted = start(&s);
    let until = Instant::now() + Duration::from_secs(15);
    while restarted.taken().is_empty() {
        assert!(Instant::now() < until, "{:?}", restarted.last());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(restarted.taken(), ["roster v2"]);
    assert!(matches!(
        restarted.offered.lock().unwrap().first(),
        Some(Change::Refused { .. })
    ));

    // Rotation: a second key added to the trusted file (read again at each revision) signs
    // the next push; the first key still verifies.
    let (next, _) = SigningKey::generate().unwrap();
    keys.file(
        "trusted.pub",
        &format!("{}{}", key.public_pem(), next.public_pem()),
    );
    let rotated = push(&s, KEY, b"roster v3", &next).await.unwrap();
    converge(&[node.clone(), restarted.clone()], rotated.revision).await;
    assert_eq!(node.taken(), ["roster v1", "roster v2", "roster v3"]);
    let by_old = push(&s, KEY, b"roster v4", &key).await.unwrap();
    converge(std::slice::from_ref(&node), by_old.revision).await;
    assert_eq!(node.taken().last().map(String::as_str), Some("roster v4"));

    // The first document put again as the latest revision: a node started now takes the
    // newest signed one of the history, and counts the latest as stale.
    publish_raw(nats.port, "{}", &subject, &old_value)
        .await
        .unwrap();
    refused(&node, "stale").await;
    let fresh = start(&s);
    let until = Instant::now() + Duration::from_secs(15);
    while fresh.taken().is_empty() {
        assert!(Instant::now() < until, "{:?}", fresh.last());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fresh.taken(), ["roster v4"]);
    assert!(matches!(
        fresh.offered.lock().unwrap().first(),
        Some(Change::Refused {
            refusal: fleet::Refusal::Stale { .. },
            ..
        })
    ));
}

/// A follower with `credentials` set on its section takes pushes made with the same ones; a
/// raw publish without them is refused by the server.
async fn authenticated(nats: &NatsServer, credentials: impl Fn(&mut FleetSection)) {
    let (key, keys) = operator();
    let mut s = section(nats.url(), &keys);
    credentials(&mut s);
    assert!(s.validate().is_ok());
    let r = push(&s, KEY, b"doc", &key).await.unwrap();
    let node = start(&s);
    converge(std::slice::from_ref(&node), r.revision).await;
    let e = publish_raw(nats.port, "{}", &format!("$KV.{}.{KEY}", s.bucket), b"x")
        .await
        .unwrap_err();
    assert!(e.to_lowercase().contains("authorization"), "{e}");
    // Without credentials, a push cannot connect at all.
    let bare = section(nats.url(), &keys);
    assert!(push(&bare, KEY, b"doc", &key).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_credentials_token_user_and_nkey() {
    let dir = TempDir::new("fleet-creds");
    let token = "t0ken-for-the-fleet-0123456789abcdef0123";
    let token_file = dir.file("token", token);
    let nats =
        NatsServer::start_with_config(&format!("authorization {{ token: \"{token}\" }}")).await;
    authenticated(&nats, |s| s.token_file = Some(token_file.clone())).await;
    drop(nats);

    let password_file = dir.file("password", "a-password-of-the-fleet");
    let nats = NatsServer::start_with_config(
        "authorization { users = [ { user: \"gavel\", password: \"a-password-of-the-fleet\" } ] }",
    )
    .await;
    authenticated(&nats, |s| {
        s.user = Some("gavel".into());
        s.password_file = Some(password_file.clone());
    })
    .await;
    drop(nats);

    let user = nkeys::KeyPair::new_user();
    let seed_file = dir.file("user.nk", &user.seed().unwrap());
    let nats = NatsServer::start_with_config(&format!(
        "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}",
        user.public_key()
    ))
    .await;
    authenticated(&nats, |s| s.nkey_seed_file = Some(seed_file.clone())).await;
}
