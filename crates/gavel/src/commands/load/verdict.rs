//! `gavel load`'s exit status: a run that fails its gates (loadgen's `gate` module) or is used
//! wrongly ends with a status of its own and one line per reason on stderr, so that CI can
//! tell a slow target (3) from a generator that could not keep its schedule (4), a target that
//! answered nothing (5), a wrong command line (2) and a run that could not be made at all (1,
//! every other error of `gavel`).

use loadgen::gate::{Failure, FailureKind};

/// The flags are wrong together (clap's own refusals exit 2 as well).
pub const USAGE: u8 = 2;
/// `--slo` or a `--fail-if` was missed; with `--find-capacity`, no rate passed.
pub const THRESHOLD: u8 = 3;
/// The generator's connections or CPU limited the run: its figures are the generator's.
pub const LIMITED: u8 = 4;
/// No request got an HTTP answer.
pub const NOTHING_ANSWERED: u8 = 5;

/// How `gavel load` ended when not with success: the status and the lines that say why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub code: u8,
    /// One line each, most fundamental first.
    pub reasons: Vec<String>,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reasons.join("\n"))
    }
}

impl std::error::Error for Failed {}

/// A usage error: the flags do not make a run.
pub fn usage(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(Failed {
        code: USAGE,
        reasons: vec![format!("{e:#}")],
    })
}

/// The status of a judged run: that of its most fundamental failure (nothing answered, then
/// limited, then a threshold); `None` when it passed.
pub fn of_failures(failures: &[Failure]) -> Option<Failed> {
    let code = failures
        .iter()
        .map(|f| match f.kind {
            FailureKind::NothingAnswered => NOTHING_ANSWERED,
            FailureKind::Limited => LIMITED,
            FailureKind::Threshold => THRESHOLD,
        })
        .max()?;
    Some(Failed {
        code,
        reasons: failures.iter().map(|f| one_line(&f.reason)).collect(),
    })
}

/// A reason on one line, whatever its source wrote.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: FailureKind, reason: &str) -> Failure {
        Failure {
            kind,
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn the_most_fundamental_failure_sets_the_status() {
        assert_eq!(of_failures(&[]), None);
        let t = failure(FailureKind::Threshold, "--fail-if p99>5ms: p99 was 9 ms");
        let l = failure(
            FailureKind::Limited,
            "limited by the generator's CPU:\n lag",
        );
        let n = failure(FailureKind::NothingAnswered, "nothing answered");
        assert_eq!(
            of_failures(std::slice::from_ref(&t)).unwrap().code,
            THRESHOLD
        );
        assert_eq!(of_failures(&[l.clone(), t.clone()]).unwrap().code, LIMITED);
        let all = of_failures(&[n, l, t]).unwrap();
        assert_eq!(all.code, NOTHING_ANSWERED);
        assert_eq!(all.reasons.len(), 3);
        assert_eq!(all.reasons[1], "limited by the generator's CPU: lag");
        assert_eq!(all.to_string().lines().count(), 3);
    }
}
