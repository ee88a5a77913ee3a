//! What a configuration that loads may still get wrong without a word, said before it costs
//! money: `gavel check-config` prints it, and the exchange logs it at start and at every
//! reload. Blocking (it looks hosts up): call it off the runtime's threads.
//!
//! | warning | what it would cost |
//! | --- | --- |
//! | a bidder's endpoint host does not resolve | the bidder is skipped until it does (`skips_total{reason="unresolved"}`) |
//! | an endpoint or notice host resolves to an address notices are never sent to, with `notices.allow_private_addresses = false` | its win and billing notices are refused: impressions run and nobody is billed |
//! | a seller key from `examples/keys` | anyone who read the repository can run auctions as that seller (refused outright on a non-loopback listener) |
//! | bidders with a `gvl_vendor_id` but no `privacy.gvl_file` | TCF is not enforced: where GDPR applies, every bidder gets every field |
//! | a bidder `currency` other than the auction's with no `[currency]` rates | floors cannot be converted for it: skipped (`no_rate`) whenever a request has a floor |

use std::net::{IpAddr, ToSocketAddrs};

use crate::config::Validated;
use upstream::outbound::address_allowed;

/// Each bidder's endpoint host as this check found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLookup {
    pub bidder: String,
    pub host: String,
    /// Its addresses, or why there are none.
    pub found: Result<Vec<IpAddr>, String>,
}

/// Every warning about `v`, each a sentence naming the key and the setting to change.
pub fn warnings(v: &Validated) -> Vec<String> {
    let mut out = Vec::new();
    let allow = v.config.notices.allow_private_addresses;
    for lookup in endpoint_lookups(v) {
        let key = bidder_key(v, &lookup.bidder);
        match &lookup.found {
            Err(why) => out.push(format!(
                "{key}: endpoint {why}; the exchange starts without it (skipped, counted as \
                 skips_total{{reason=\"unresolved\"}}) and looks it up again every \
                 upstream.dns_refresh_ms"
            )),
            Ok(ips) => {
                if let Some(ip) = ips.iter().find(|ip| !address_allowed(**ip, allow)) {
                    out.push(private_warning(&key, "endpoint", &lookup.host, *ip));
                }
            }
        }
    }
    for (i, resolved) in v.bidders.iter().enumerate() {
        let b = &resolved.config;
        let key = format!("bidders[{i}] ({:?})", b.name);
        let default_port = resolved.endpoint.scheme.default_port();
        for entry in &b.notice_hosts {
            let Ok(authority) = entry.parse::<http::uri::Authority>() else {
                continue;
            };
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            let port = authority.port_u16().unwrap_or(default_port);
            match lookup(host, port) {
                Err(why) => out.push(format!(
                    "{key}: notice host {why}: its notices there will be refused (no_address) until it resolves"
                )),
                Ok(ips) => {
                    if let Some(ip) = ips.iter().find(|ip| !address_allowed(**ip, allow)) {
                        out.push(private_warning(&key, "notice host", host, *ip));
                    }
                }
            }
        }
    }
    let c = &v.config;
    if c.live.privacy.gvl_file.is_none() && c.live.bidders.iter().any(|b| b.gvl_vendor_id.is_some())
    {
        out.push(
            "privacy.gvl_file: not set, so TCF is not enforced: where GDPR applies every bidder \
             gets every field, whatever its gvl_vendor_id (docs/privacy.md)"
                .to_owned(),
        );
    }
    let no_rates = c.live.currency.rates_file.is_none() && c.live.currency.rates_url.is_none();
    for (i, b) in c.live.bidders.iter().enumerate() {
        if no_rates
            && let Some(cur) = &b.currency
            && *cur != c.auction.default_currency
        {
            out.push(format!(
                "bidders[{i}] ({:?}): currency {cur:?} with no [currency] rates: its floors \
                 cannot be converted, so it is skipped (no_rate) whenever a request has a floor",
                b.name
            ));
        }
    }
    for (i, seller) in v.sellers.iter().enumerate() {
        if seller.example_key {
            out.push(format!(
                "sellers[{i}] ({:?}): uses an example key from the repository (examples/keys): \
                 anyone who has read it can run auctions as this seller; make a key with \
                 `openssl rand -hex 32` (the exchange refuses to start with it on a non-loopback \
                 listener)",
                seller.name
            ));
        }
    }
    out
}

/// Each bidder's endpoint host, looked up now (an IP literal is its own answer).
pub fn endpoint_lookups(v: &Validated) -> Vec<HostLookup> {
    v.bidders
        .iter()
        .map(|b| HostLookup {
            bidder: b.config.name.clone(),
            host: b.endpoint.host.clone(),
            found: lookup(&b.endpoint.host, b.endpoint.port),
        })
        .collect()
}

/// The sellers of `v` that use a key from `examples/keys`.
pub fn example_key_sellers(v: &Validated) -> Vec<String> {
    v.sellers
        .iter()
        .filter(|s| s.example_key)
        .map(|s| s.name.clone())
        .collect()
}

fn lookup(host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
    let addrs: Vec<IpAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host} does not resolve ({e})"))?
        .map(|a| a.ip())
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    Ok(addrs)
}

fn bidder_key(v: &Validated, name: &str) -> String {
    let i = v
        .config
        .live
        .bidders
        .iter()
        .position(|b| b.name == name)
        .unwrap_or(0);
    format!("bidders[{i}] ({name:?})")
}

fn private_warning(key: &str, what: &str, host: &str, ip: IpAddr) -> String {
    format!(
        "{key}: {what} {host} resolves to {ip}, an address notices are never sent to while \
         notices.allow_private_addresses = false: its win and billing notices will be refused \
         (gavel_exchange_bidder_notices_refused_total{{reason=\"address\"}}) and its impressions \
         never billed; set notices.allow_private_addresses = true if the bidder really lives there"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn private_and_unresolved_hosts_and_example_keys_are_named() {
        let dir = testkit::TempDir::new("warnings");
        let key = dir.join("pub.key");
        testkit::secrets::write_private(&key, "example-only-pub-a-0123456789abcdef");
        let text = format!(
            "[[sellers]]\nname = \"pub-a\"\nkey_file = {:?}\n\
             [[bidders]]\nname = \"local\"\nendpoint = \"http://127.0.0.1:9001/\"\n\
             notice_hosts = [\"10.1.2.3:80\"]\n\
             [[bidders]]\nname = \"gone\"\nendpoint = \"http://no-such-host.invalid/\"\n\
             [[bidders]]\nname = \"public\"\nendpoint = \"http://8.8.8.8/\"\n",
            key.display().to_string()
        );
        let v = Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"));
        let w = warnings(&v);
        assert_eq!(w.len(), 4, "{w:#?}");
        assert!(
            w[0].starts_with("bidders[0] (\"local\"): endpoint 127.0.0.1 resolves to 127.0.0.1"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("notices.allow_private_addresses"), "{}", w[0]);
        assert!(
            w[1].starts_with(
                "bidders[1] (\"gone\"): endpoint no-such-host.invalid does not resolve"
            ),
            "{}",
            w[1]
        );
        assert!(
            w[2].starts_with("bidders[0] (\"local\"): notice host 10.1.2.3 resolves to 10.1.2.3"),
            "{}",
            w[2]
        );
        assert!(
            w[3].starts_with("sellers[0] (\"pub-a\"): uses an example key"),
            "{}",
            w[3]
        );
        assert_eq!(example_key_sellers(&v), ["pub-a"]);
        // Allowing private addresses silences those two.
        let allowed = Config::from_toml(&format!(
            "{text}\n[notices]\nallow_private_addresses = true\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(warnings(&allowed).len(), 2);
    }
}
