//! Consent and privacy signals, decoded: the TCF 2.2 consent string (`tcf`), the Global Vendor
//! List in its v3 JSON format (`gvl`), a vendor's legal basis for a purpose under TCF 2.2's
//! rules (`basis`), and the GPP string with its TCF, US-privacy and US national and state
//! sections (`gpp`). No I/O and no policy about requests: the exchange decides what a decoded
//! signal does to what a bidder receives.

pub mod basis;
pub mod gpp;
pub mod gvl;
pub mod tcf;
