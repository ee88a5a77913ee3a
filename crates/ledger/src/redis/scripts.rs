//! The ledger's Lua scripts, each the shared prelude (`lua/common.lua`) followed by its body.
//! Redis runs a script atomically, so each ledger operation is one indivisible step.

use std::sync::LazyLock;

use super::client::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(include_str!("lua/common.lua"), include_str!($file)))
        });
    };
}

script!(SET_LIMITS, "lua/set_limits.lua");
script!(RESERVE, "lua/reserve.lua");
script!(COMMIT, "lua/commit.lua");
script!(RELEASE, "lua/release.lua");
script!(EXPIRE, "lua/expire.lua");
script!(BALANCES, "lua/balances.lua");
script!(TAKE_LEASE, "lua/take_lease.lua");
script!(REPORT_LEASE, "lua/report_lease.lua");
script!(CLOSE_LEASE, "lua/close_lease.lua");
script!(CHECK, "lua/check.lua");
script!(SETTLE, "lua/settle.lua");
script!(DRAIN, "lua/drain.lua");
script!(OPEN_LEDGER, "lua/open_ledger.lua");
