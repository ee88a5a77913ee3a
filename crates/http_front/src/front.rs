//! [`Front`]: the sections of every server's file that say where it listens, who may use its
//! admin listener and what it accepts from its clients. Declared, documented and checked once
//! here; each server's file reads them beside its own sections ([`settings::Whole`]).

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use serde::Serialize;
use serde::de::{DeserializeOwned, MapAccess};

use crate::{AdminSettings, HttpSection};

/// The keys [`Front`] owns in a server's file.
pub const FRONT_KEYS: [&str; 4] = ["listen", "admin_listen", "security", "http"];

/// A server's `[security]` section: the admin keys of [`AdminSettings`], and whatever the server
/// adds (the bidder's notice keys).
pub trait SecuritySection: Default + Clone + fmt::Debug + Serialize + DeserializeOwned {
    /// The admin door's part.
    fn admin(&self) -> AdminSettings;
    /// Makes its relative paths start at `dir`, the file's directory.
    fn resolve_paths(&mut self, dir: &Path);
}

impl SecuritySection for AdminSettings {
    fn admin(&self) -> AdminSettings {
        self.clone()
    }
    fn resolve_paths(&mut self, dir: &Path) {
        AdminSettings::resolve_paths(self, dir);
    }
}

/// Where a server listens and what its front door accepts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Front<S = AdminSettings> {
    /// `listen`: the public address, `ip:port`, or `host:port` resolved at start (its first
    /// IPv4 address, else its first). `--listen` overrides it. Default: the server's own port
    /// on 127.0.0.1.
    pub listen: SocketAddr,
    /// `admin_listen`: the address of `/admin/*` and `/metrics`, which the public port never
    /// serves. A non-loopback address needs `security.admin_remote = true`. Default: the
    /// server's own port on 127.0.0.1.
    pub admin_listen: SocketAddr,
    /// `[security]`: admin access (token, audit log), and the server's own keys.
    pub security: S,
    /// `[http]`: what the server accepts from its clients.
    pub http: HttpSection,
    /// The addresses the command line set in place of the file's ([`Front::set_addresses`]):
    /// a reload keeps them.
    #[serde(skip)]
    pub overrides: (Option<SocketAddr>, Option<SocketAddr>),
}

impl<S: SecuritySection> Front<S> {
    /// The defaults of a server listening on `listen`, its admin listener on `admin_listen`.
    pub fn listening(listen: SocketAddr, admin_listen: SocketAddr) -> Front<S> {
        Front {
            listen,
            admin_listen,
            security: S::default(),
            http: HttpSection::default(),
            overrides: (None, None),
        }
    }

    /// Checks the sections with `listen` and `admin_listen` as given (the command line may
    /// override the file's): the admin address apart from the public one and on loopback
    /// unless asked for, and `[http]`'s ranges. Errors name the key.
    ///
    /// # Errors
    /// The first value out of its range, naming its key.
    pub fn check_at(
        &self,
        listen: SocketAddr,
        admin_listen: SocketAddr,
    ) -> Result<(), settings::ConfigError> {
        self.security.admin().validate(listen, admin_listen)?;
        self.http.check()?;
        Ok(())
    }

    /// [`Front::check_at`] at the file's own addresses.
    ///
    /// # Errors
    /// As [`Front::check_at`].
    pub fn check(&self) -> Result<(), settings::ConfigError> {
        self.check_at(self.listen, self.admin_listen)
    }

    /// The command line's `--listen` and `--admin-listen`, where given, in place of the
    /// file's, checked as the file's are.
    ///
    /// # Errors
    /// The addresses break the admin door's rule; the file's stay.
    pub fn set_addresses(
        &mut self,
        listen: Option<SocketAddr>,
        admin_listen: Option<SocketAddr>,
    ) -> Result<(), settings::Invalid> {
        let given = (listen, admin_listen);
        if listen.is_none() && admin_listen.is_none() {
            return Ok(());
        }
        let listen = listen.unwrap_or(self.listen);
        let admin_listen = admin_listen.unwrap_or(self.admin_listen);
        self.security.admin().validate(listen, admin_listen)?;
        self.listen = listen;
        self.admin_listen = admin_listen;
        self.overrides = (given.0.or(self.overrides.0), given.1.or(self.overrides.1));
        Ok(())
    }

    /// `running`'s command-line addresses over this file's, as at start: a reload of the
    /// file does not move what the command line set.
    ///
    /// # Errors
    /// As [`Front::set_addresses`].
    pub fn keep_overrides(&mut self, running: &Front<S>) -> Result<(), settings::Invalid> {
        self.set_addresses(running.overrides.0, running.overrides.1)
    }

    /// Makes the relative paths of `[security]` start at `dir`.
    pub fn resolve_paths(&mut self, dir: &Path) {
        self.security.resolve_paths(dir);
    }
}

/// An address read as `deserialize_listen` reads it.
struct Listen(SocketAddr);

impl<'de> serde::Deserialize<'de> for Listen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        settings::deserialize_listen(d).map(Listen)
    }
}

impl<S: SecuritySection> settings::Sections for Front<S> {
    fn owns(key: &str) -> bool {
        FRONT_KEYS.contains(&key)
    }
    fn keys() -> Vec<&'static str> {
        FRONT_KEYS.to_vec()
    }
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "listen" => self.listen = map.next_value::<Listen>()?.0,
            "admin_listen" => self.admin_listen = map.next_value::<Listen>()?.0,
            "security" => self.security = map.next_value()?,
            _ => self.http = map.next_value()?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        #[serde(flatten, skip_deserializing, default = "front")]
        front: Front,
        #[serde(default)]
        own: u32,
    }

    fn front() -> Front {
        Front::listening(
            SocketAddr::from(([127, 0, 0, 1], 1)),
            SocketAddr::from(([127, 0, 0, 1], 2)),
        )
    }

    impl settings::WithShared for Server {
        type Shared = Front;
        fn shared_defaults() -> Front {
            front()
        }
        fn set_shared(&mut self, shared: Front) {
            self.front = shared;
        }
    }

    fn parse(text: &str) -> Result<Front, String> {
        let settings::Whole(server) =
            toml::from_str::<settings::Whole<Server>>(text).map_err(|e| e.to_string())?;
        server.front.check().map_err(|e| e.to_string())?;
        Ok(server.front)
    }

    #[test]
    fn every_key_is_read_and_the_defaults_are_the_servers() {
        let f = parse(
            "listen = \"127.0.0.1:7\"\nadmin_listen = \"localhost:8\"\nown = 1\n\
             [security]\nadmin_reads_need_token = false\n[http]\nmax_connections = 9",
        )
        .unwrap();
        assert_eq!(f.listen.port(), 7);
        assert_eq!(f.admin_listen.port(), 8, "a host name is resolved");
        assert!(!f.security.admin_reads_need_token);
        assert_eq!(f.http.max_connections, 9);
        assert_eq!(parse("").unwrap(), front());
    }

    #[test]
    fn the_checks_name_their_key() {
        let remote = parse("admin_listen = \"10.1.2.3:8\"").unwrap_err();
        assert!(
            remote.contains("admin_listen") && remote.contains("admin_remote"),
            "{remote}"
        );
        let same = parse("listen = \"127.0.0.1:5\"\nadmin_listen = \"127.0.0.1:5\"").unwrap_err();
        assert!(
            same.contains("admin_listen: must differ from listen"),
            "{same}"
        );
        let http = parse("[http]\nmax_connections = 0").unwrap_err();
        assert!(http.contains("http.max_connections"), "{http}");
        let typo = parse("[security]\nadmin_token = \"x\"").unwrap_err();
        let mut f = front();
        let remote = SocketAddr::from(([10, 0, 0, 1], 9));
        let e = f.set_addresses(None, Some(remote)).unwrap_err();
        assert_eq!(e.key, "admin_listen", "{e}");
        assert_eq!(f, front(), "a refused override changes nothing");
        f.set_addresses(Some(SocketAddr::from(([127, 0, 0, 1], 3))), None)
            .unwrap();
        assert_eq!((f.listen.port(), f.admin_listen.port()), (3, 2));
        let mut reloaded =
            parse("listen = \"127.0.0.1:4\"\nadmin_listen = \"127.0.0.1:5\"").unwrap();
        reloaded.keep_overrides(&f).unwrap();
        assert_eq!(
            (reloaded.listen.port(), reloaded.admin_listen.port()),
            (3, 5),
            "the command line's address stays, the file's other one is read"
        );
        assert!(typo.contains("unknown field `admin_token`"), "{typo}");
    }
}
