//! Who may put into the markup store, and how fast. Reads stay open to anyone holding an id;
//! writes are what a stranger could use to flush the store, so:
//!
//! | caller | needs | limited by | its entries live in |
//! | --- | --- | --- | --- |
//! | a writer (`[[store.writers]]`: an exchange, a Prebid Server) | one of its keys, `Authorization: Bearer` | its own `max_puts_per_s`, `max_bytes_per_s` (optional) | its own share of `store.max_bytes` |
//! | anyone, with `store.anonymous_puts` (Prebid.js from the page) | nothing | per client address (an IPv6 client's /64): `anonymous_puts_per_s`, `anonymous_bytes_per_s` | the anonymous share |
//!
//! Each share is evicted only by its own puts, so a flood from one caller cannot push out
//! another's unexpired markup. Keys are compared as SHA-256 digests; a wrong key is refused even
//! when anonymous puts are allowed (a misconfigured writer should hear about it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::config::StoreSection;
use crate::rate::Bucket;

/// Client addresses tracked for anonymous puts at most; past it, idle ones are forgotten and,
/// if none is idle, a new client waits (429) until one is.
pub const MAX_CLIENTS: usize = 100_000;

/// A caller that may put, known before its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// `[[store.writers]]` entry `n`.
    Keyed(usize),
    Anonymous,
}

/// Why a put was refused. Labels are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PutRefusal {
    #[error(
        "puts need a writer's key (Authorization: Bearer <key>); see store.writers in docs/edge.md"
    )]
    NoKey,
    #[error("that key is no writer's")]
    UnknownKey,
    #[error("too many puts from this client; retry in {retry_after_ms} ms")]
    RateLimited { retry_after_ms: u64 },
}

impl PutRefusal {
    pub const fn label(self) -> &'static str {
        match self {
            PutRefusal::NoKey => "no_key",
            PutRefusal::UnknownKey => "unknown_key",
            PutRefusal::RateLimited { .. } => "rate_limited",
        }
    }
}

/// Put requests and bytes, per second: a pair of buckets.
#[derive(Debug, Clone, Copy)]
struct Limits {
    puts_per_s: u64,
    bytes_per_s: u64,
}

#[derive(Debug, Clone, Copy)]
struct Buckets {
    puts: Bucket,
    bytes: Bucket,
}

impl Limits {
    fn full(self, now_ms: u64) -> Buckets {
        Buckets {
            puts: Bucket::full(self.puts_per_s, now_ms),
            bytes: Bucket::full(self.bytes_per_s, now_ms),
        }
    }

    /// Takes one request of `bytes` from `b` if both buckets allow it (a limit of 0 is none).
    fn admit(self, b: &mut Buckets, bytes: u64, now_ms: u64) -> Result<(), PutRefusal> {
        let mut wait = 0;
        if self.puts_per_s > 0
            && let Err(ms) = b.puts.check(self.puts_per_s, 1, now_ms)
        {
            wait = wait.max(ms);
        }
        if self.bytes_per_s > 0
            && let Err(ms) = b.bytes.check(self.bytes_per_s, bytes, now_ms)
        {
            wait = wait.max(ms);
        }
        if wait > 0 {
            return Err(PutRefusal::RateLimited {
                retry_after_ms: wait,
            });
        }
        b.puts.take(1);
        b.bytes.take(bytes);
        Ok(())
    }

    fn idle(self, b: &Buckets, now_ms: u64) -> bool {
        b.puts.is_full(self.puts_per_s, now_ms) && b.bytes.is_full(self.bytes_per_s, now_ms)
    }
}

#[derive(Debug)]
struct Keyed {
    limits: Limits,
    buckets: Mutex<Option<Buckets>>,
}

#[derive(Debug)]
struct Anonymous {
    limits: Limits,
    clients: Mutex<HashMap<IpAddr, Buckets>>,
    /// When idle clients were last forgotten: at most once a second, so that a full table
    /// costs a new client one look, not a sweep each.
    last_sweep_ms: std::sync::atomic::AtomicU64,
}

/// The store's writers, from `[store]`.
#[derive(Debug)]
pub struct Writers {
    by_digest: HashMap<[u8; 32], usize>,
    keyed: Vec<Keyed>,
    anonymous: Option<Anonymous>,
}

impl Writers {
    pub fn new(store: &StoreSection) -> Writers {
        let mut by_digest = HashMap::new();
        for (i, digests) in store.writer_keys.iter().enumerate() {
            for d in digests {
                by_digest.insert(*d, i);
            }
        }
        Writers {
            by_digest,
            keyed: store
                .writers
                .iter()
                .map(|w| Keyed {
                    limits: Limits {
                        puts_per_s: w.max_puts_per_s,
                        bytes_per_s: w.max_bytes_per_s,
                    },
                    buckets: Mutex::new(None),
                })
                .collect(),
            anonymous: store.anonymous_puts.then(|| Anonymous {
                limits: Limits {
                    puts_per_s: store.anonymous_puts_per_s,
                    bytes_per_s: store.anonymous_bytes_per_s,
                },
                clients: Mutex::new(HashMap::new()),
                last_sweep_ms: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Who a put request is, from its bearer token (`http_front::bearer_token`), before its body is
    /// read.
    pub fn authenticate(&self, key: Option<&[u8]>) -> Result<Writer, PutRefusal> {
        match key {
            Some(k) => {
                let digest: [u8; 32] = Sha256::digest(k).into();
                self.by_digest
                    .get(&digest)
                    .map(|&i| Writer::Keyed(i))
                    .ok_or(PutRefusal::UnknownKey)
            }
            None if self.anonymous.is_some() => Ok(Writer::Anonymous),
            None => Err(PutRefusal::NoKey),
        }
    }

    /// Takes one put request of `bytes` from `writer`'s allowance (an anonymous one's is its
    /// client address's) at `now_ms`.
    pub fn admit(
        &self,
        writer: Writer,
        peer: IpAddr,
        bytes: u64,
        now_ms: u64,
    ) -> Result<(), PutRefusal> {
        match writer {
            Writer::Keyed(i) => {
                let Some(w) = self.keyed.get(i) else {
                    return Err(PutRefusal::UnknownKey);
                };
                let mut buckets = telemetry::locks::lock(&w.buckets);
                let b = buckets.get_or_insert_with(|| w.limits.full(now_ms));
                w.limits.admit(b, bytes, now_ms)
            }
            Writer::Anonymous => {
                let Some(a) = &self.anonymous else {
                    return Err(PutRefusal::NoKey);
                };
                let client = client_of(peer);
                let mut clients = telemetry::locks::lock(&a.clients);
                if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
                    use std::sync::atomic::Ordering::Relaxed;
                    if now_ms.saturating_sub(a.last_sweep_ms.load(Relaxed)) >= 1_000 {
                        a.last_sweep_ms.store(now_ms, Relaxed);
                        clients.retain(|_, b| !a.limits.idle(b, now_ms));
                    }
                    if clients.len() >= MAX_CLIENTS {
                        return Err(PutRefusal::RateLimited {
                            retry_after_ms: 1_000,
                        });
                    }
                }
                let b = clients
                    .entry(client)
                    .or_insert_with(|| a.limits.full(now_ms));
                a.limits.admit(b, bytes, now_ms)
            }
        }
    }

    /// The share `writer`'s entries go to: its index, or the last one for anonymous puts
    /// (index-aligned with [`StoreSection::budgets`]).
    pub fn share_of(&self, writer: Writer) -> usize {
        match writer {
            Writer::Keyed(i) => i,
            Writer::Anonymous => self.keyed.len(),
        }
    }
}

/// The unit anonymous puts are limited by: an IPv4 address (also when it reaches a
/// dual-stack listener as `::ffff:a.b.c.d`), or an IPv6 address's /64 (one host usually holds
/// a whole /64).
fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WriterConfig;

    fn section(anonymous: bool) -> StoreSection {
        StoreSection {
            writers: vec![
                WriterConfig {
                    name: "exchange".into(),
                    key_file: None,
                    key_env: None,
                    share: None,
                    max_puts_per_s: 0,
                    max_bytes_per_s: 0,
                },
                WriterConfig {
                    name: "pbs".into(),
                    key_file: None,
                    key_env: None,
                    share: Some(0.2),
                    max_puts_per_s: 2,
                    max_bytes_per_s: 0,
                },
            ],
            writer_keys: vec![
                vec![Sha256::digest(b"exchange-key").into()],
                vec![Sha256::digest(b"pbs-key").into()],
            ],
            anonymous_puts: anonymous,
            anonymous_puts_per_s: 2,
            anonymous_bytes_per_s: 1_000,
            max_bytes: 1_000_000,
            ..StoreSection::default()
        }
    }

    const V4: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    #[test]
    fn keys_name_their_writer_and_nothing_else_gets_in_unless_anonymous_is_on() {
        let w = Writers::new(&section(false));
        assert_eq!(w.authenticate(Some(b"exchange-key")), Ok(Writer::Keyed(0)));
        assert_eq!(w.authenticate(Some(b"pbs-key")), Ok(Writer::Keyed(1)));
        assert_eq!(w.authenticate(Some(b"guess")), Err(PutRefusal::UnknownKey));
        assert_eq!(w.authenticate(None), Err(PutRefusal::NoKey));
        let open = Writers::new(&section(true));
        assert_eq!(open.authenticate(None), Ok(Writer::Anonymous));
        assert_eq!(
            open.authenticate(Some(b"guess")),
            Err(PutRefusal::UnknownKey)
        );
        assert_eq!(open.share_of(Writer::Anonymous), 2);
        // The budgets: pbs 20%, anonymous 10%, the exchange what is left.
        assert_eq!(section(true).budgets(), [700_000, 200_000, 100_000]);
        assert_eq!(section(false).budgets(), [800_000, 200_000, 0]);
    }

    #[test]
    fn each_writer_and_each_anonymous_client_has_its_own_allowance() {
        let w = Writers::new(&section(true));
        // The exchange has no cap.
        for _ in 0..1_000 {
            assert_eq!(w.admit(Writer::Keyed(0), V4, 100_000, 0), Ok(()));
        }
        // pbs: two a second.
        assert_eq!(w.admit(Writer::Keyed(1), V4, 1, 0), Ok(()));
        assert_eq!(w.admit(Writer::Keyed(1), V4, 1, 0), Ok(()));
        assert_eq!(
            w.admit(Writer::Keyed(1), V4, 1, 0),
            Err(PutRefusal::RateLimited {
                retry_after_ms: 500
            })
        );
        // Anonymous: 2 puts and 1,000 bytes a second per client.
        assert_eq!(w.admit(Writer::Anonymous, V4, 600, 0), Ok(()));
        assert_eq!(
            w.admit(Writer::Anonymous, V4, 600, 0),
            Err(PutRefusal::RateLimited {
                retry_after_ms: 200
            })
        );
        let other: IpAddr = "192.0.2.2".parse().unwrap_or(V4);
        assert_eq!(w.admit(Writer::Anonymous, other, 600, 0), Ok(()));
        // Two addresses of one IPv6 /64 are one client.
        let a: IpAddr = "2001:db8:1:2::a".parse().unwrap_or(V4);
        let b: IpAddr = "2001:db8:1:2::b".parse().unwrap_or(V4);
        let c: IpAddr = "2001:db8:1:3::a".parse().unwrap_or(V4);
        assert_eq!(w.admit(Writer::Anonymous, a, 1_000, 0), Ok(()));
        assert!(w.admit(Writer::Anonymous, b, 1, 0).is_err());
        assert_eq!(w.admit(Writer::Anonymous, c, 1, 0), Ok(()));
        assert_eq!(w.admit(Writer::Anonymous, b, 1, 1_000), Ok(()));
        // Found by review: on a dual-stack listener every IPv4 client arrives as ::ffff:a.b.c.d,
        // which as a /64 made them all one client.
        let mapped: IpAddr = "::ffff:198.51.100.7".parse().unwrap_or(V4);
        let other_mapped: IpAddr = "::ffff:198.51.100.8".parse().unwrap_or(V4);
        assert_eq!(w.admit(Writer::Anonymous, mapped, 1_000, 5_000), Ok(()));
        assert_eq!(
            w.admit(Writer::Anonymous, other_mapped, 1_000, 5_000),
            Ok(())
        );
        assert_eq!(client_of(mapped), "198.51.100.7".parse().unwrap_or(V4));
    }
}
