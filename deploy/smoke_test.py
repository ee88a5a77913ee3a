#!/usr/bin/env python3
"""The compose stack's configurations, run for real on loopback without Docker: Redis with a
password, NATS with JetStream, `gavel ledger create`, the bidder, the edge, `gavel sim` and the
exchange on the sim's file followed by its own (as compose.yaml's command does), each with the
environment compose.yaml gives it. Host names and ports are moved to free loopback ports and
/var/lib/gavel to a directory per server; nothing else changes.

Then: the Dockerfile's own HEALTHCHECK command against each server (and a closed port); 600
auctions from the seller's key; the books (wins of Gavel's bidder, markup stored in the edge,
records written and none dropped, leases granted); and SIGTERM: each server exits 0 before
the 30 s its supervisors allow.

  python3 deploy/smoke_test.py --gavel target/debug/gavel      # needs redis-server, nats-server"""

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose"
STOP_BUDGET_S = 30.0  # terminationGracePeriodSeconds, stop_grace_period, TimeoutStopSec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, gavel: str, work: Path):
        self.gavel = gavel
        self.work = work
        self.procs: dict[str, subprocess.Popen] = {}
        # compose's (host, port) -> a free loopback port.
        self.ports = {key: free_port() for key in [
            ("exchange", 8080), ("exchange", 8081), ("bidder", 9100), ("bidder", 9101),
            ("edge", 8090), ("edge", 8091), ("redis", 6379), ("nats", 4222)]}
        self.env = {
            "GAVEL_ADMIN_TOKEN": secrets.token_hex(32),
            "GAVEL_NOTICE_KEY": secrets.token_hex(32),
            "GAVEL_SELLER_PUB_A": secrets.token_hex(32),
            "GAVEL_STORE_KEY": secrets.token_hex(32),
            "REDIS_PASSWORD": secrets.token_hex(32),
        }

    def port(self, host: str, port: int) -> int:
        return self.ports[(host, port)]

    def rewrite(self, text: str, server: str) -> str:
        for (host, port), new in self.ports.items():
            text = text.replace(f"//{host}:{port}", f"//127.0.0.1:{new}").replace(f"@{host}:{port}", f"@127.0.0.1:{new}")
            if host == server:
                text = text.replace(f'"0.0.0.0:{port}"', f'"127.0.0.1:{new}"')
        state = self.work / f"state-{server}"
        state.mkdir(exist_ok=True)
        return text.replace('"/var/lib/gavel', f'"{state}')

    def config(self, server: str, names: list[str]) -> Path:
        d = self.work / f"config-{server}"
        d.mkdir(exist_ok=True)
        for name in names:
            (d / name).write_text(self.rewrite((COMPOSE / "config" / name).read_text(), server))
        return d

    def start(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = open(self.work / f"{name}.log", "w")
        full_env = dict(os.environ, GAVEL_LOG="warn", **(env or {}))
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=self.work)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def server_env(self, server: str) -> dict:
        """What compose.yaml's `environment` gives the service, ${...} filled from .env."""
        import yaml

        doc = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
        env = {}
        for key, value in (doc["services"][server].get("environment") or {}).items():
            value = re.sub(r"\$\{([A-Z_]+)[^}]*\}", lambda m: self.env[m.group(1)], str(value))
            env[key] = self.rewrite(value, server)
        return env


def wait_http(url: str, deadline: float) -> int | None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            time.sleep(0.1)
    return None


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def healthcheck_command(gavel: str) -> list[str]:
    """The CMD of the Dockerfile's HEALTHCHECK, as Docker would run it (the image's binary is the
    one under test)."""
    text = (ROOT / "deploy" / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    m = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", text, re.M)
    if not m:
        raise SystemExit("no HEALTHCHECK CMD in the Dockerfile")
    return [gavel if arg == "/usr/local/bin/gavel" else arg for arg in json.loads(m.group(1))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gavel", required=True)
    gavel = str(Path(parser.parse_args().gavel).resolve())
    for tool in ("redis-server", "nats-server"):
        if shutil.which(tool) is None:
            print(f"deploy smoke: {tool} is needed (Debian package)", file=sys.stderr)
            return 2
    results: list[tuple[str, bool, str]] = []

    def expect(what: str, ok: bool, detail: str = "") -> None:
        results.append((what, ok, detail))
        shown = detail if (not ok or len(detail) <= 100) else ""
        print(("ok   " if ok else "FAIL ") + what + (f": {shown}" if shown else ""))

    with tempfile.TemporaryDirectory(prefix="gavel-deploy-smoke-") as tmp:
        stack = Stack(gavel, Path(tmp))
        try:
            run(stack, expect)
        finally:
            stack.stop_all()
            if any(not ok for _, ok, _ in results):
                for log in sorted(Path(tmp).glob("*.log")):
                    print(f"--- {log.name} (last lines)\n" + "\n".join(log.read_text().splitlines()[-15:]))
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"deploy smoke: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def run(stack: Stack, expect) -> None:
    g, p, work = stack.gavel, stack.port, stack.work
    stack.start("redis", ["redis-server", "--port", str(p("redis", 6379)), "--bind", "127.0.0.1",
                          "--requirepass", stack.env["REDIS_PASSWORD"], "--save", "", "--appendonly", "no"])
    stack.start("nats", ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(p("nats", 4222)), "-sd", str(work / "nats")])
    deadline = time.monotonic() + 20
    for port in (p("redis", 6379), p("nats", 4222)):
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
    bidder_dir = stack.config("bidder", ["bidder.toml", "campaigns.json"])
    edge_dir = stack.config("edge", ["edge.toml"])
    exchange_dir = stack.config("exchange", ["exchange.toml"])
    created = subprocess.run([g, "ledger", "create", "--config", str(bidder_dir / "bidder.toml")],
                             env=dict(os.environ, **stack.server_env("ledger-create")),
                             capture_output=True, text=True, timeout=60)
    expect("gavel ledger create (compose's ledger-create service)", created.returncode == 0, created.stderr.strip()[-300:])
    state = work / "state-bidder"
    expect("the ledger marker is written in the state volume", any(state.glob("gavel-ledger-*")), str(list(state.iterdir())))
    stack.start("bidder", [g, "bidder", "--config", str(bidder_dir / "bidder.toml")], stack.server_env("bidder"))
    stack.start("edge", [g, "edge", "--config", str(edge_dir / "edge.toml")], stack.server_env("edge"))
    sim_file = work / "sim-bidders.toml"
    stack.start("sim", [g, "--threads", "1", "sim", "--bidders", "3", "--write-bidders", str(sim_file)])
    deadline = time.monotonic() + 30
    while not sim_file.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    combined = work / "exchange-combined.toml"
    combined.write_text(sim_file.read_text() + (exchange_dir / "exchange.toml").read_text())
    stack.start("exchange", [g, "exchange", "--config", str(combined),
                             "--listen", f"127.0.0.1:{p('exchange', 8080)}", "--admin-listen", f"127.0.0.1:{p('exchange', 8081)}"],
                stack.server_env("exchange"))
    servers = {"exchange": p("exchange", 8080), "bidder": p("bidder", 9100), "edge": p("edge", 8090)}
    deadline = time.monotonic() + 60
    for name, port in servers.items():
        status = wait_http(f"http://127.0.0.1:{port}/healthz", deadline)
        expect(f"{name} answers /healthz", status == 200, f"status {status}")
    for name, port in servers.items():
        ready = None
        while time.monotonic() < deadline:
            ready = wait_http(f"http://127.0.0.1:{port}/readyz", deadline)
            if ready in (200, 404):
                break
            time.sleep(0.2)
        # 404: a build from before /readyz; the probe's path is then only checked by deploy/check.py.
        expect(f"{name} ready on /readyz (or a build without it)", ready in (200, 404), f"status {ready}")
    command = healthcheck_command(g)
    for name, port in servers.items():
        rc = subprocess.run(command, env=dict(os.environ, GAVEL_HEALTH_PORT=str(port)), timeout=10).returncode
        expect(f"the image's HEALTHCHECK passes on {name}", rc == 0, f"exit {rc}")
    rc = subprocess.run(command, env=dict(os.environ, GAVEL_HEALTH_PORT=str(free_port())), capture_output=True, timeout=10).returncode
    expect("the image's HEALTHCHECK fails on a closed port", rc != 0, f"exit {rc}")
    load = subprocess.run(
        [g, "--threads", "1", "load", "--url", f"http://127.0.0.1:{p('exchange', 8080)}/openrtb2/auction",
         "--rate", "200", "--duration", "3s", "--seller-key-env", "GAVEL_SELLER_PUB_A", "--report-only", "--no-progress",
         "--json", str(work / "load.json")],
        env=dict(os.environ, GAVEL_SELLER_PUB_A=stack.env["GAVEL_SELLER_PUB_A"]), capture_output=True, text=True, timeout=60)
    expect("600 auctions from the seller's key", load.returncode == 0, load.stderr.strip()[-300:])
    time.sleep(1.5)  # a lease report and a record batch
    ex = metrics(f"http://127.0.0.1:{p('exchange', 8081)}/metrics")
    bd = metrics(f"http://127.0.0.1:{p('bidder', 9101)}/metrics")
    wins = ex.get('gavel_exchange_wins_total{bidder="gavel-bidder"}', 0)
    expect("Gavel's bidder wins auctions (Redis leases, signed notices)", wins > 0, f"{wins:g} wins")
    stored = ex.get('gavel_exchange_markup_cache_total{outcome="stored"}', 0)
    expect("winners' markup stored in the edge (writer key)", stored > 0, f"{stored:g} stored")
    written = ex.get("gavel_exchange_records_written_total", 0)
    dropped = sum(v for k, v in ex.items() if k.startswith("gavel_exchange_records_dropped_total"))
    expect("auction records written to NATS JetStream, none dropped", written > 0 and dropped == 0, f"{written:g} written, {dropped:g} dropped")
    grants = bd.get("gavel_bidder_lease_grants_total", 0)
    expect("the bidder took leases from Redis", grants > 0, f"{grants:g} grants")
    # All three at once, as a rollout or a host shutdown does: each must finish its drain
    # (grace, work in flight, flush) before its supervisor's SIGKILL.
    started = time.monotonic()
    for name in ("exchange", "bidder", "edge"):
        stack.procs[name].send_signal(signal.SIGTERM)
    for name in ("exchange", "bidder", "edge"):
        what = f"{name} drains on SIGTERM and exits 0 within {STOP_BUDGET_S:g} s"
        try:
            code = stack.procs[name].wait(timeout=max(0.0, STOP_BUDGET_S - (time.monotonic() - started)))
            expect(what, code == 0, f"exit {code} after {time.monotonic() - started:.1f} s")
        except subprocess.TimeoutExpired:
            expect(what, False, "still running: a supervisor would SIGKILL it")

if __name__ == "__main__":
    sys.exit(main())
