//! [`Call`]: the scripts a pipeline may mix (lease mode's rounds), each its typed call, and
//! [`ScriptReply`], their answers. Generated from one list, so a script joins pipelines in one line.

use super::{
    CloseLease, Ctx, Drain, Encoded, Expire, Keys, LedgerScript, ReportLease, Routed, SetLimits,
    SettleRequest, TakeLease,
};
use crate::redis::LedgerError;
use crate::redis::client::Script;
use crate::redis::resp::Value;

/// A script call ready to send: the script, its keys, and its arguments after the base.
pub(crate) type Ready = (&'static Script, Routed, Vec<String>);

/// Declares the calls a pipeline may mix, each a script type, and their answers.
macro_rules! pipelined {
    ($($call:ident($script:ty) => $answer:ident),* $(,)?) => {
        /// One script call in a pipeline ([`RedisLedger::pipeline`]).
        #[derive(Clone, Debug)]
        pub(crate) enum Call {
            $($call($script)),*
        }

        /// The answer to a [`Call`], of the matching kind.
        #[derive(Clone, Debug)]
        pub(crate) enum ScriptReply {
            $($answer(<$script as LedgerScript>::Reply)),*
        }

        impl Call {
            /// The script and its arguments, or the answer when no call is needed.
            pub(crate) fn encode(
                &self,
                ctx: &Ctx<'_>,
                keys: &Keys,
            ) -> Result<Ready, Result<ScriptReply, LedgerError>> {
                match self {
                    $(Call::$call(c) => match c.encode(ctx) {
                        Encoded::Send(args) => Ok((script_of::<$script>(), c.routed(keys), args)),
                        Encoded::Answered(answer) => Err(answer.map(ScriptReply::$answer)),
                    }),*
                }
            }

            pub(crate) fn decode(&self, reply: Value) -> Result<ScriptReply, LedgerError> {
                match self {
                    $(Call::$call(c) => c.decode(reply).map(ScriptReply::$answer)),*
                }
            }
        }
    };
}

fn script_of<S: LedgerScript>() -> &'static Script {
    S::script()
}

pipelined! {
    SetLimits(SetLimits) => LimitsSet,
    TakeLease(TakeLease) => Grant,
    ReportLease(ReportLease) => Report,
    CloseLease(CloseLease) => Close,
    Expire(Expire) => Swept,
    Settle(SettleRequest) => Settled,
    Drain(Drain) => Drained,
}
