"""deploy/systemd: `systemd-analyze verify` on each unit when systemd is here (its ExecStart
pointed at the binary under test, since verify wants an executable), and the directives the
drain and the hardening need, with values that hold them up."""

import configparser
import shutil
import subprocess
from pathlib import Path

from . import drain

# Directive -> the value it must have (None: present, any value).
REQUIRED = {
    "KillSignal": "SIGTERM",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "CapabilityBoundingSet": "",
    "Restart": None,
    "LimitNOFILE": None,
    "TimeoutStopSec": None,
}


def _service_section(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # directives are case-sensitive
    parser.read_string(path.read_text())
    return dict(parser["Service"]) if parser.has_section("Service") else {}


def check(root: Path, gavel: Path, work: Path, report) -> None:
    units = sorted((root / "deploy" / "systemd").glob("*.service"))
    if not units:
        report.problem("deploy/systemd", "no unit")
        return
    for unit in units:
        where = f"systemd/{unit.name}"
        try:
            service = _service_section(unit)
        except configparser.Error as e:
            report.problem(where, f"unreadable: {e}")
            continue
        for key, want in REQUIRED.items():
            if key not in service:
                report.problem(where, f"no {key}=")
            elif want is not None and service[key].strip() != want:
                report.problem(where, f"{key}={service[key]}, not {want or '(empty)'}")
        if "User" not in service and service.get("DynamicUser") != "yes":
            report.problem(where, "neither User= nor DynamicUser=yes: it would run as root")
        stop = drain.parse_duration_s(service.get("TimeoutStopSec", ""))
        if stop is not None and stop <= drain.needed_seconds(None):
            report.problem(where, f"TimeoutStopSec={service['TimeoutStopSec']} does not exceed the drain and flush ({drain.needed_seconds(None):g} s)")
        if "ExecReload" in service and "edge" in service.get("ExecStart", ""):
            report.problem(where, "ExecReload sends SIGHUP, which ends the edge (it reloads nothing)")
        report.passed()
    verify = shutil.which("systemd-analyze")
    if verify is None:
        report.note("systemd: no systemd-analyze here; the units were not verified by systemd")
        return
    work.mkdir(parents=True, exist_ok=True)
    for unit in units:
        copy = work / unit.name
        copy.write_text(unit.read_text().replace("/usr/local/bin/gavel", str(gavel.resolve())))
    result = subprocess.run(
        [verify, "verify", "--man=no", *[str(work / u.name) for u in units]],
        capture_output=True, text=True,
    )
    # verify prints to stderr and exits non-zero on a bad unit; lines about other units
    # (the host's own) are not ours.
    ours = [line for line in result.stderr.splitlines() if any(u.name in line for u in units)]
    if result.returncode != 0 or ours:
        report.problem("deploy/systemd", "systemd-analyze verify: " + ("; ".join(ours) or result.stderr.strip()))
    else:
        report.passed()
