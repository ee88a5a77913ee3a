//! `[[bidders]]`: one demand partner as the exchange's file writes it. What it resolves to at
//! load (its address, TLS, price key) is `config::ResolvedBidder`.

use std::path::PathBuf;

use serde::Deserialize;

/// One demand partner.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BidderConfig {
    /// Unique name, used in metrics and reports.
    pub name: String,
    /// `http://host:port/path` the bid requests are POSTed to. The host is resolved when the
    /// configuration loads.
    pub endpoint: String,
    /// Cap on open connections (and so on concurrent requests) to this bidder. Default 64.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// A disabled bidder stays configured but gets no traffic. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Requests per second at most (a token bucket with one second of burst); auctions beyond
    /// it skip this bidder. Default: no cap.
    #[serde(default)]
    pub max_qps: Option<u32>,
    /// Hosts (`host` or `host:port`) its notice URLs may name besides the endpoint's own host
    /// and port. A notice to any other host is refused and counted. Default: none.
    #[serde(default)]
    pub notice_hosts: Vec<String>,
    /// A winning bid without `adm` gets its markup by a GET of its `nurl`, whose answer goes
    /// to the seller. Off, such a bid is invalid. Default false.
    #[serde(default)]
    pub fetch_markup: bool,
    /// PEM file of the CA certificates that verify this bidder's `https` endpoint and notice
    /// hosts (relative to the configuration file). Default: the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Name sent as SNI and expected in an `https` endpoint's certificate. Default: the
    /// endpoint's host.
    #[serde(default)]
    pub tls_server_name: Option<String>,
    /// File holding the key this bidder shares with the exchange for price tokens (one key of
    /// at least 32 bytes; relative to the configuration file). With it, `${AUCTION_PRICE}` in
    /// this bidder's winning `nurl`, `burl` and markup is a token only the exchange can make,
    /// bound to the auction, imp and bid, instead of the plain price (docs/security.md). Read
    /// again at every reload, and when the file changes. Default: none, the plain price.
    #[serde(default)]
    pub price_key_file: Option<PathBuf>,
    /// Environment variable holding that key, instead of a file.
    #[serde(default)]
    pub price_key_env: Option<String>,
    /// The OpenRTB version it speaks: `"2.6"` (default) or `"2.5"`, which gets the request
    /// converted down (consent, `gdpr`, `us_privacy`, `schain`, `eids` under `ext`; 2.6-only
    /// fields dropped) and its answer read as 2.5.
    #[serde(default)]
    pub openrtb_version: OpenRtbVersion,
    /// Send it gzip-compressed requests and ask for compressed answers. Default false.
    /// Compressed answers are accepted from every bidder (inflated within the answer limit).
    #[serde(default)]
    pub gzip: bool,
    /// Its vendor id in the Global Vendor List: where GDPR applies and TCF is enforced, a
    /// bidder without one is not called (docs/privacy.md).
    #[serde(default)]
    pub gvl_vendor_id: Option<u16>,
    /// The currency it bids in and wants floors in (ISO-4217). Default: the auction's. Floors
    /// are converted to it, rounded up; its bids may still name any currency with a rate.
    #[serde(default)]
    pub currency: Option<String>,
}

/// An OpenRTB version a bidder speaks.
#[derive(Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
pub enum OpenRtbVersion {
    #[serde(rename = "2.5")]
    V2_5,
    #[default]
    #[serde(rename = "2.6")]
    V2_6,
}

fn default_max_connections() -> u32 {
    64
}
fn default_true() -> bool {
    true
}
