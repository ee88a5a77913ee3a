#!/usr/bin/env python3
"""Proves deploy/check.py can fail: the deployment files copied aside, broken one way at a
time, and the checker must refuse each copy naming the problem (and pass the unbroken copy).

  python3 deploy/check_test.py [--gavel target/debug/gavel]

Each case is (what breaks, the part to check, file, text replaced, replacement, what the
report must say)."""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = [
    ("an unknown field in a Deployment (strict schema)", "k8s", "deploy/k8s/exchange.yaml",
     "      terminationGracePeriodSeconds: 30", "      terminationGracePeriodSecond: 30", "schema"),
    ("a wrong type in a Service", "k8s", "deploy/k8s/bidder.yaml",
     "    - {name: http, port: 9100, targetPort: http, protocol: TCP}", "    - {name: http, port: many, targetPort: http, protocol: TCP}", "schema"),
    ("readiness on /healthz", "k8s", "deploy/k8s/bidder.yaml",
     "httpGet: {path: /readyz, port: http}", "httpGet: {path: /healthz, port: http}", "readinessProbe"),
    ("a grace period shorter than the drain", "k8s", "deploy/k8s/edge.yaml",
     "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 12", "terminationGracePeriodSeconds 12"),
    ("the public Service exposing the admin port", "k8s", "deploy/k8s/exchange.yaml",
     "    - {name: http, port: 8080, targetPort: http, protocol: TCP}", "    - {name: http, port: 8080, targetPort: http, protocol: TCP}\n    - {name: metrics, port: 8081, targetPort: admin, protocol: TCP}", "admin port"),
    ("an unknown key in a ConfigMap's TOML", "k8s", "deploy/k8s/bidder.yaml",
     '    redis_mode = "lease"', '    redis_mode = "lease"\n    lease_chunks = 0.05', "check-config refused"),
    ("a bad value in a ConfigMap's TOML", "k8s", "deploy/k8s/exchange.yaml",
     "    max_connections = 8192", "    max_connections = 0", "check-config refused"),
    ("an environment override of a key that does not exist", "k8s", "deploy/k8s/exchange.yaml",
     "            - name: GAVEL_EXCHANGE__NODE", "            - name: GAVEL_EXCHANGE__NODES", "check-config refused"),
    ("a GAVEL_ variable Gavel does not read", "k8s", "deploy/k8s/edge.yaml",
     "            - name: GAVEL_LOG_FORMAT", "            - name: GAVEL_LOGFORMAT", "no variable Gavel reads"),
    ("a Secret key the TOML needs, missing", "k8s", "deploy/k8s/secrets.example.yaml",
     "  price.keys: REPLACE", "  price.key: REPLACE", "lacks"),
    ("a URL naming no Service", "k8s", "deploy/k8s/exchange.yaml",
     'url = "http://gavel-edge:8090/cache"', 'url = "http://gavel-edg:8090/cache"', "names nothing"),
    ("a Deployment without a disruption budget", "k8s", "deploy/k8s/edge.yaml",
     "kind: PodDisruptionBudget\nmetadata:\n  name: gavel-edge\n  namespace: gavel\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/name: gavel-edge}",
     "kind: PodDisruptionBudget\nmetadata:\n  name: gavel-edge\n  namespace: gavel\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/name: someone-else}", "PodDisruptionBudget"),
    ("a container that may escalate privileges", "k8s", "deploy/k8s/bidder.yaml",
     "            allowPrivilegeEscalation: false", "            allowPrivilegeEscalation: true", "allowPrivilegeEscalation"),
    ("a manifest the kustomization leaves out", "k8s", "deploy/k8s/kustomization.yaml",
     "  - edge.yaml\n", "", "does not list edge.yaml"),
    ("a ledger marker directory nothing makes", "k8s", "deploy/k8s/bidder.yaml",
     '    state_dir = "/var/lib/gavel"', '    state_dir = "/var/lib/gavel/state"', "not writable"),
    ("a compose service on a Gavel subcommand that does not exist", "compose", "deploy/compose/compose.yaml",
     'command: ["edge", "--config", "/etc/gavel/edge.toml"]', 'command: ["edges", "--config", "/etc/gavel/edge.toml"]', "runs no Gavel server"),
    ("a compose port published on every interface", "compose", "deploy/compose/compose.yaml",
     'ports: ["127.0.0.1:8090:8090"]', 'ports: ["8090:8090"]', "every interface"),
    ("an unknown key in a compose configuration", "compose", "deploy/compose/config/bidder.toml",
     'redis_mode = "lease"', 'redis_mode = "leases"', "check-config refused"),
    ("a compose file the specification refuses", "compose", "deploy/compose/compose.yaml",
     "    restart: unless-stopped\n    # Keep the ledger", "    restart: sometimes-maybe\n    resart: no\n    # Keep the ledger", "docker compose config refused"),
    ("a unit whose stop timeout cuts the drain", "systemd", "deploy/systemd/gavel-bidder.service",
     "TimeoutStopSec=30s", "TimeoutStopSec=10s", "TimeoutStopSec=10s"),
    ("a unit without NoNewPrivileges", "systemd", "deploy/systemd/gavel-exchange.service",
     "NoNewPrivileges=yes\n", "", "NoNewPrivileges"),
    ("a unit systemd refuses", "systemd", "deploy/systemd/gavel-edge.service",
     "Type=exec", "Type=sometimes", "systemd-analyze verify"),
    ("an image that runs as root", "docker", "deploy/docker/Dockerfile",
     "USER 10001:10001", "USER root", "runs as root"),
    ("an image without a healthcheck", "docker", "deploy/docker/Dockerfile",
     "HEALTHCHECK --interval", "# HEALTHCHECK --interval", "HEALTHCHECK"),
    ("an image built with the quicker, slower-running release profile", "docker", "deploy/docker/Dockerfile",
     "cargo build --profile production --locked", "cargo build --release --locked",
     "without --profile production"),
]


def copy_tree(root: Path, dest: Path) -> None:
    shutil.copytree(root / "deploy", dest / "deploy", ignore=shutil.ignore_patterns("__pycache__", ".env"))
    shutil.copy(root / ".dockerignore", dest / ".dockerignore")


def run(dest: Path, gavel: str, part: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(dest / "deploy" / "check.py"), "--root", str(dest), "--gavel", gavel, "--only", part, "--k8s-versions", "1.30,1.37"],
        capture_output=True, text=True, timeout=600,
    )


def unbroken(clean: Path, gavel: str, part: str) -> tuple[bool, str]:
    result = run(clean, gavel, part)
    if result.returncode == 0:
        return True, ""
    return False, f"FAIL the unbroken files ({part}) were refused:\n{result.stdout}{result.stderr}"


def broken(dest: Path, root: Path, gavel: str, case) -> tuple[bool, str]:
    what, part, file, old, new, expect = case
    copy_tree(root, dest)
    target = dest / file
    text = target.read_text()
    if text.count(old) < 1:
        return False, f"FAIL {what}: the text to break is not in {file} (the case is stale)"
    target.write_text(text.replace(old, new, 1))
    result = run(dest, gavel, part)
    if result.returncode == 1 and expect in result.stdout:
        return True, f"ok   {what}"
    return False, f"FAIL {what}: exit {result.returncode}, expected a problem saying {expect!r}:\n{result.stdout}{result.stderr}"


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser()
    parser.add_argument("--gavel", required=True)
    gavel = parser.parse_args().gavel
    with tempfile.TemporaryDirectory(prefix="gavel-deploy-check-test-") as tmp:
        clean = Path(tmp) / "clean"
        copy_tree(root, clean)
        jobs = [lambda part=part: unbroken(clean, gavel, part) for part in ("k8s", "compose", "systemd", "docker")]
        jobs += [lambda i=i, case=case: broken(Path(tmp) / f"case{i}", root, gavel, case) for i, case in enumerate(CASES)]
        # Each case is its own copy and its own process: run them on every core.
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(lambda job: job(), jobs))
    for ok, line in results:
        if line:
            print(line)
    passed = sum(1 for ok, _ in results if ok)
    failed = len(results) - passed
    print(f"deploy check self-test: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
