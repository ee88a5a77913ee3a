#!/usr/bin/env python3
"""Checks the deployment files offline, and fails naming each problem:

  python3 deploy/check.py [--gavel target/debug/gavel] [--root .] [--only k8s,compose,...]

- deploy/k8s: the Kubernetes JSON schemas of every version in K8S_VERSIONS (strict), through
  the kubernetes-validate package; cross-references and the rules docs/deploy.md states;
- deploy/compose: `docker compose config` when a compose binary is here; structure;
- deploy/systemd: `systemd-analyze verify` when systemd is here; the drain and hardening;
- deploy/docker: hadolint when installed; the image's rules;
- every Gavel configuration those files carry, with the environment they set, through
  `gavel check-config` (an unknown key, a bad value, a GAVEL_* variable Gavel does not read).

A tool that is missing is said on stdout ("not checked: ..."), never passed silently. .ci/run
installs them (pinned) into a venv and runs this; deploy/check_test.py breaks the files one
way at a time and expects a failure each time."""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checklib import compose, dockerfile, k8s, systemd  # noqa: E402
from checklib.report import Report  # noqa: E402

# The Kubernetes minor versions the manifests are validated against (docs/deploy.md).
K8S_VERSIONS = ["1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]
PARTS = ("k8s", "compose", "systemd", "docker")


def main() -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=here.parent, help="the repository (default: this file's)")
    parser.add_argument("--gavel", type=Path, default=None, help="the gavel binary (default: ROOT/target/debug/gavel, or $CARGO_TARGET_DIR's)")
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--k8s-versions", default=",".join(K8S_VERSIONS))
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(PARTS)
    if unknown:
        parser.error(f"--only: unknown part {', '.join(sorted(unknown))}")
    gavel = args.gavel or find_gavel(args.root)
    if gavel is None or not gavel.is_file():
        print("deploy check: no gavel binary (give --gavel; `cargo build -p gavel` makes one)", file=sys.stderr)
        return 2
    venv_bin = Path(sys.executable).parent
    report = Report()
    with tempfile.TemporaryDirectory(prefix="gavel-deploy-check-") as tmp:
        work = Path(tmp)
        if "k8s" in only:
            k8s.check(args.root, gavel, args.k8s_versions.split(","), work / "k8s", report)
        if "compose" in only:
            compose.check(args.root, gavel, venv_bin, work / "compose", report)
        if "systemd" in only:
            systemd.check(args.root, gavel, work / "systemd", report)
        if "docker" in only:
            dockerfile.check(args.root, venv_bin, report)
    for note in report.notes:
        print(f"not checked: {note}")
    for problem in report.problems:
        print(f"PROBLEM {problem}")
    verdict = "FAILED" if report.problems else "ok"
    print(f"deploy check {verdict}: {report.checked} checks passed, {len(report.problems)} problems"
          f" (Kubernetes {args.k8s_versions.split(',')[0]}-{args.k8s_versions.split(',')[-1]})")
    return 1 if report.problems else 0


def find_gavel(root: Path) -> Path | None:
    import os

    for target in [os.environ.get("CARGO_TARGET_DIR"), str(root / "target")]:
        if target and (Path(target) / "debug" / "gavel").is_file():
            return Path(target) / "debug" / "gavel"
    return None


if __name__ == "__main__":
    sys.exit(main())
