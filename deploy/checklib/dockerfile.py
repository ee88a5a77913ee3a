"""deploy/docker/Dockerfile: hadolint when it is installed, and what this project asks of the
image whether or not it is: several stages (the toolchain stays out of the image), a locked
production-profile build, a non-root user last, a HEALTHCHECK, and a .dockerignore that keeps build
output, VCS data and key files out of the build context."""

import re
import shutil
import subprocess
from pathlib import Path


def check(root: Path, venv_bin: Path | None, report) -> None:
    path = root / "deploy" / "docker" / "Dockerfile"
    where = "docker/Dockerfile"
    try:
        text = path.read_text()
    except OSError as e:
        report.problem(where, f"unreadable: {e}")
        return
    # Continuation lines joined, comments dropped: one instruction per line.
    joined = re.sub(r"\\\n", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    instructions = [l.strip() for l in joined.splitlines() if l.strip()]
    froms = [l for l in instructions if l.upper().startswith("FROM ")]
    if len(froms) < 2:
        report.problem(where, "one stage: the build toolchain would ship in the image")
    last_stage = instructions[instructions.index(froms[-1]):] if froms else instructions
    last_users = [l.split(None, 1)[1] for l in last_stage if l.upper().startswith("USER ")]
    if not last_users or last_users[-1].split(":")[0] in ("root", "0"):
        report.problem(where, f"the image runs as root (USER {last_users[-1] if last_users else 'unset'})")
    if not any(l.upper().startswith("HEALTHCHECK ") and "NONE" not in l.upper() for l in last_stage):
        report.problem(where, "no HEALTHCHECK in the runtime stage")
    builds = [l for l in instructions if "cargo build" in l]
    # The image ships the build the benchmarks measure: thin LTO (Cargo.toml's production).
    if not builds or not all("--locked" in l and "--profile production" in l for l in builds):
        report.problem(where, "cargo build without --profile production --locked")
    ignore = root / ".dockerignore"
    patterns = ignore.read_text().split() if ignore.is_file() else []
    for needed in ("target/", ".git/", "**/*.key"):
        if needed not in patterns:
            report.problem(".dockerignore", f"does not exclude {needed}")
    report.passed()
    hadolint = shutil.which("hadolint") or (str(venv_bin / "hadolint") if venv_bin and (venv_bin / "hadolint").is_file() else None)
    if hadolint is None:
        report.note("docker: no hadolint here; the Dockerfile was checked by the rules above only")
        return
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        report.problem(where, "hadolint: " + (result.stdout.strip() or result.stderr.strip()).replace("\n", "; "))
    else:
        report.passed()
