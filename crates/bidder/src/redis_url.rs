//! `ledger.redis_url`: `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS.
//! Pure parsing; user and password may be percent-encoded (`%40` for `@`). The password never
//! appears in an error or in [`RedisUrl`]'s `Display`.

use std::fmt;

/// A parsed Redis URL.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `host:port` (port 6379 when absent).
    pub addr: String,
    /// The host alone: the name a TLS certificate must carry.
    pub host: String,
    pub db: u32,
    /// ACL user (`AUTH user password`); `None` with a password uses the default user.
    pub username: Option<String>,
    pub password: Option<String>,
    /// `rediss://`.
    pub tls: bool,
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// The URL with its password hidden, for logs and messages.
impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let user = self.username.as_deref().unwrap_or("");
        match &self.password {
            Some(_) => write!(f, "{scheme}://{user}:***@{}/{}", self.addr, self.db),
            None => write!(f, "{scheme}://{}/{}", self.addr, self.db),
        }
    }
}

/// Writes `url` with its password hidden, for printing a configuration (`--check`); a text that
/// is not a Redis URL is written as a note, since it might hold a password too.
pub(crate) fn serialize_hidden<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    match parse(url) {
        Ok(u) => s.serialize_str(&u.to_string()),
        Err(_) => s.serialize_str("(not a valid Redis URL)"),
    }
}

/// [`serialize_hidden`] for a list of URLs (`ledger.redis_cluster_nodes`).
pub(crate) fn serialize_hidden_all<S: serde::Serializer>(
    urls: &[String],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(urls.len()))?;
    for url in urls {
        let shown = match parse(url) {
            Ok(u) => u.to_string(),
            Err(_) => "(not a valid Redis URL)".to_owned(),
        };
        seq.serialize_element(&shown)?;
    }
    seq.end()
}

const SHAPE: &str = "is not redis[s]://[[user]:password@]host[:port][/db]";

/// Parses a Redis URL; the error says what is wrong without repeating the password.
pub(crate) fn parse(url: &str) -> Result<RedisUrl, String> {
    if url.len() > 1024 {
        return Err("is longer than 1024 bytes".into());
    }
    let (tls, rest) = match (url.strip_prefix("rediss://"), url.strip_prefix("redis://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        _ => {
            return Err(format!(
                "{SHAPE} (it must start with redis:// or rediss://)"
            ));
        }
    };
    let (userinfo, location) = match rest.rsplit_once('@') {
        Some((userinfo, location)) => (Some(userinfo), location),
        None => (None, rest),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => {
            let (user, pass) = info
                .split_once(':')
                .ok_or_else(|| format!("{SHAPE} (credentials are user:password or :password)"))?;
            let user = openrtb::query::percent_decode_exact(user)
                .ok_or_else(|| format!("{SHAPE} (bad %-escape in the user)"))?;
            let pass = openrtb::query::percent_decode_exact(pass)
                .ok_or_else(|| format!("{SHAPE} (bad %-escape in the password)"))?;
            if pass.is_empty() {
                return Err(format!("{SHAPE} (empty password)"));
            }
            ((!user.is_empty()).then_some(user), Some(pass))
        }
    };
    let shown = location;
    let (host_port, db) = match location.split_once('/') {
        Some((hp, "")) => (hp, 0),
        Some((hp, db)) => (
            hp,
            db.parse::<u32>()
                .map_err(|_| format!("{SHAPE} (database {db:?} is not a number)"))?,
        ),
        None => (location, 0),
    };
    if host_port.is_empty() || host_port.len() > 255 {
        return Err(format!("{SHAPE} (no host in {shown:?})"));
    }
    let (host, addr) = match host_port.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            (host.to_owned(), host_port.to_owned())
        }
        Some(_) => return Err(format!("{SHAPE} (bad port in {shown:?})")),
        None => (host_port.to_owned(), format!("{host_port}:6379")),
    };
    Ok(RedisUrl {
        addr,
        host,
        db,
        username,
        password,
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(url: &str) -> RedisUrl {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn hosts_ports_databases_credentials_and_tls() {
        let plain = ok("redis://h");
        assert_eq!(
            (plain.addr.as_str(), plain.db, plain.tls),
            ("h:6379", 0, false)
        );
        assert_eq!((plain.username, plain.password), (None, None));
        let full = ok("rediss://gavel:s3cr%40t@redis.internal:6380/2");
        assert_eq!(full.addr, "redis.internal:6380");
        assert_eq!(full.host, "redis.internal");
        assert_eq!(full.db, 2);
        assert!(full.tls);
        assert_eq!(full.username.as_deref(), Some("gavel"));
        assert_eq!(full.password.as_deref(), Some("s3cr@t"));
        let default_user = ok("redis://:pw@h:1");
        assert_eq!(
            (default_user.username, default_user.password.as_deref()),
            (None, Some("pw"))
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        let url = ok("redis://u:hunter2@h:1/0");
        assert_eq!(url.to_string(), "redis://u:***@h:1/0");
        assert!(!format!("{url:?}").contains("hunter2"));
        for bad in [
            "redis://u:hunter2@h:x",
            "redis://u:hunter2@",
            "redis://u:hunter2@h/x",
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn malformed_urls_are_refused_with_the_reason() {
        for (bad, why) in [
            ("http://h", "must start with"),
            ("redis://", "no host"),
            ("redis://h:x", "bad port"),
            ("redis://h/x", "not a number"),
            ("redis://user@h", "user:password"),
            ("redis://u:@h", "empty password"),
            ("redis://u:%zz@h", "%-escape"),
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
