//! CORS for endpoints that pages call from the browser (Prebid.js's Prebid Server adapter):
//! which origins may call, the answer to a preflight, and the headers on every answer to an
//! allowed origin.
//!
//! Prebid.js sends its requests with credentials (the user-sync cookies), so an allowed origin
//! is echoed with `Access-Control-Allow-Credentials: true`: the browser refuses `*` there. A
//! request from an origin that is not allowed is refused (403) before its body is read, not
//! served and hidden from the page: a foreign page must not make the exchange call its
//! bidders. A request without `Origin` (a server, a script) is not a browser's and is served
//! as before.

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

/// Longest `Origin` accepted (scheme, host and port).
pub const MAX_ORIGIN_BYTES: usize = 256;
/// Most origins a list may name.
pub const MAX_ORIGINS: usize = 1_000;

/// `[cors]`: which origins a page may call from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CorsSection {
    /// Origins allowed to call from a browser, as the browser writes them
    /// (`https://news.example`, with a port when not the scheme's own), or `"*"` for any, as
    /// Prebid Server allows. Default `["*"]`; an empty list allows none.
    pub allowed_origins: Vec<String>,
    /// How long a browser may keep a preflight's answer, in seconds. Default 600; at most
    /// 86400.
    pub max_age_s: u64,
}

impl Default for CorsSection {
    fn default() -> Self {
        CorsSection {
            allowed_origins: vec!["*".to_owned()],
            max_age_s: 600,
        }
    }
}

impl CorsSection {
    /// Checks the section; the error names the key (under `section`, e.g. `cors`).
    ///
    /// # Errors
    /// An entry that is not `*` nor `scheme://host[:port]`, too many, or an age out of range.
    pub fn check(&self, section: &str) -> Result<(), settings::Invalid> {
        let key = format!("{section}.allowed_origins");
        if self.allowed_origins.len() > MAX_ORIGINS {
            return Err(settings::Invalid::new(
                key,
                format!("at most {MAX_ORIGINS} origins"),
            ));
        }
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            if origin != "*" && !is_origin(origin) {
                return Err(settings::Invalid::new(
                    format!("{key}[{i}]"),
                    format!(
                        "{:?} is not an origin: write \"*\" or scheme://host[:port], as the \
                         browser sends it (no path, no trailing slash)",
                        origin.chars().take(64).collect::<String>()
                    ),
                ));
            }
        }
        settings::check_range(format!("{section}.max_age_s"), self.max_age_s, 0..=86_400)?;
        Ok(())
    }
}

/// `http://` or `https://`, a host of visible ASCII without `/`, `@` or spaces, and an optional
/// port: what a browser sends in `Origin`.
fn is_origin(text: &str) -> bool {
    let scheme = |s: &str| {
        text.get(..s.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(s))
            .then(|| text.get(s.len()..).unwrap_or_default())
    };
    let Some(rest) = scheme("https://").or_else(|| scheme("http://")) else {
        return false;
    };
    text.len() <= MAX_ORIGIN_BYTES
        && !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b'@' | b'?' | b'#' | b'\\'))
}

/// The CORS rules of one endpoint, built from its section.
#[derive(Debug, Clone)]
pub struct Cors {
    any: bool,
    /// Lowercase, as browsers send scheme and host.
    origins: Vec<String>,
    max_age: HeaderValue,
}

/// What a request's `Origin` makes of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No `Origin`: not a browser's cross-origin call; nothing to add.
    NoOrigin,
    /// Allowed: its answer carries these CORS headers.
    Allowed(HeaderValue),
    /// A browser page from an origin that may not call.
    Refused,
}

/// The methods a preflight allows.
const METHODS: &str = "POST, OPTIONS";
/// The request headers a preflight allows: what Prebid and OpenRTB clients send.
const HEADERS: &str = "Content-Type, Authorization, X-OpenRTB-Version, X-Requested-With";

impl Cors {
    /// The rules of `section` (checked already).
    pub fn new(section: &CorsSection) -> Cors {
        Cors {
            any: section.allowed_origins.iter().any(|o| o == "*"),
            origins: section
                .allowed_origins
                .iter()
                .filter(|o| *o != "*")
                .map(|o| o.to_ascii_lowercase())
                .collect(),
            max_age: HeaderValue::from(section.max_age_s),
        }
    }

    /// What the request's `Origin` makes of it. Several `Origin` headers, or one that is not
    /// an origin, are refused.
    pub fn verdict(&self, headers: &HeaderMap) -> Verdict {
        let mut all = headers.get_all(header::ORIGIN).iter();
        let Some(origin) = all.next() else {
            return Verdict::NoOrigin;
        };
        if all.next().is_some() {
            return Verdict::Refused;
        }
        let Ok(text) = origin.to_str() else {
            return Verdict::Refused;
        };
        if !is_origin(text) {
            return Verdict::Refused;
        }
        let allowed = self.any || self.origins.iter().any(|o| o.eq_ignore_ascii_case(text));
        if allowed {
            Verdict::Allowed(origin.clone())
        } else {
            Verdict::Refused
        }
    }

    /// Adds the CORS headers of an allowed `origin` to an answer.
    pub fn decorate<B>(origin: &HeaderValue, response: &mut Response<B>) {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
        // The answer differs by origin: no cache may hand one page's answer to another.
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }

    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`): 204 with
    /// what may be sent, or 403 for an origin that may not call (or a preflight without one).
    pub fn preflight<B: Default>(&self, headers: &HeaderMap) -> Response<B> {
        let Verdict::Allowed(origin) = self.verdict(headers) else {
            return status(StatusCode::FORBIDDEN);
        };
        let mut response = status(StatusCode::NO_CONTENT);
        Cors::decorate(&origin, &mut response);
        let h = response.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(METHODS),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(HEADERS),
        );
        h.insert(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        response
    }
}

fn status<B: Default>(code: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = code;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_origin(origin: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        h
    }

    fn only(origins: &[&str]) -> Cors {
        Cors::new(&CorsSection {
            allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            max_age_s: 60,
        })
    }

    #[test]
    fn any_origin_is_echoed_by_default_and_none_needs_nothing() {
        let cors = Cors::new(&CorsSection::default());
        assert_eq!(
            cors.verdict(&with_origin("https://news.example")),
            Verdict::Allowed(HeaderValue::from_static("https://news.example"))
        );
        assert_eq!(cors.verdict(&HeaderMap::new()), Verdict::NoOrigin);
        // A forged value that is no origin at all is refused even when any origin may call.
        for forged in [
            "null",
            "https://a.example/path",
            "javascript:x",
            "https://u@h",
        ] {
            assert_eq!(
                cors.verdict(&with_origin(forged)),
                Verdict::Refused,
                "{forged}"
            );
        }
        let mut two = with_origin("https://a.example");
        two.append(
            header::ORIGIN,
            HeaderValue::from_static("https://b.example"),
        );
        assert_eq!(cors.verdict(&two), Verdict::Refused);
    }

    #[test]
    fn a_list_allows_its_origins_only_whatever_their_case() {
        let cors = only(&["https://news.example", "http://localhost:8000"]);
        assert!(matches!(
            cors.verdict(&with_origin("HTTPS://News.Example")),
            Verdict::Allowed(_)
        ));
        assert!(matches!(
            cors.verdict(&with_origin("http://localhost:8000")),
            Verdict::Allowed(_)
        ));
        for foreign in [
            "https://news.example.evil",
            "http://news.example",
            "http://localhost:8001",
            "https://evil.example",
        ] {
            assert_eq!(
                cors.verdict(&with_origin(foreign)),
                Verdict::Refused,
                "{foreign}"
            );
        }
        assert_eq!(
            only(&[]).verdict(&with_origin("https://news.example")),
            Verdict::Refused
        );
    }

    #[test]
    fn a_preflight_says_what_may_be_sent_and_refuses_a_stranger() {
        let cors = only(&["https://news.example"]);
        let ok: Response<String> = cors.preflight(&with_origin("https://news.example"));
        assert_eq!(ok.status(), StatusCode::NO_CONTENT);
        let h = ok.headers();
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://news.example"
        );
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], METHODS);
        assert_eq!(h[header::ACCESS_CONTROL_MAX_AGE], "60");
        assert_eq!(h[header::VARY], "Origin");
        let refused: Response<String> = cors.preflight(&with_origin("https://evil.example"));
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(
            refused
                .headers()
                .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
                .is_none()
        );
        let no_origin: Response<String> = cors.preflight(&HeaderMap::new());
        assert_eq!(no_origin.status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn the_section_refuses_what_is_not_an_origin_naming_the_entry() {
        let bad = CorsSection {
            allowed_origins: vec!["https://ok.example".into(), "news.example".into()],
            max_age_s: 600,
        };
        let e = bad.check("cors").unwrap_err();
        assert_eq!(e.key, "cors.allowed_origins[1]");
        let slash = CorsSection {
            allowed_origins: vec!["https://news.example/".into()],
            max_age_s: 600,
        };
        assert!(slash.check("cors").is_err());
        let age = CorsSection {
            max_age_s: 86_401,
            ..CorsSection::default()
        };
        assert_eq!(age.check("cors").unwrap_err().key, "cors.max_age_s");
        assert!(CorsSection::default().check("cors").is_ok());
    }
}
