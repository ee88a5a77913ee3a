"""The bidder's shared ledgers side by side in one run: `gavel bidder` (10,000 campaigns, one-thread
runtime, admission off) on core 0 with the per-bid and the lease ledger, against one redis-server
and against a Redis Cluster of three masters (no replicas: the figures are the ledger's, not
replication's), all Redis processes on core 1 beside `gavel load`. Per configuration and fixed
rate: bid requests decided per second, the bidder's CPU per decision, and what each decision
costs Redis: script calls (`INFO commandstats`: EVALSHA and EVAL) and Redis CPU (`used_cpu_user
+ used_cpu_sys`, summed over the masters). Loopback only, bounded: each measurement is `--seconds`
long after 2 s of warm-up, configurations alternating round by round.

    python3 bench/ledger.py --rates 1000,3000 --rounds 3 --seconds 5

On two cores the three masters share one core, so the cluster cannot show its scaling here: the
per-operation costs are what carry over (docs/deploy.md, "Capacity model")."""
import argparse, contextlib, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bidder import write_config  # noqa: E402
from procs import GAVEL, LOAD_CORE, SERVER_CORE, Proc, free_port, gavel_load, settle  # noqa: E402

CAMPAIGNS = 10_000


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *map(str, args)], capture_output=True,
                          text=True, check=True, timeout=30).stdout


def wait_ping(port):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not start")


def cluster_port():
    """A free port whose cluster bus port (+10,000) is a port too."""
    while True:
        port = free_port()
        if port < 55_000:
            return port


class Store:
    """One redis-server, or a cluster of `masters` (no replicas), pinned to the generator's core."""

    def __init__(self, masters):
        if not shutil.which("redis-server"):
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.dir = tempfile.mkdtemp(prefix="gavel-ledger-bench-")
        self.ports = [cluster_port() if masters else free_port() for _ in range(max(masters, 1))]
        self.procs = []
        for port in self.ports:
            args = ["taskset", "-c", LOAD_CORE, "redis-server", "--port", str(port), "--bind",
                    "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
                    "--dbfilename", f"{port}.rdb"]
            if masters > 0:
                args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                         "--cluster-node-timeout", "2000"]
            self.procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
        for port in self.ports:
            wait_ping(port)
        self.cluster = masters > 0
        if self.cluster:
            subprocess.run(["redis-cli", "--cluster", "create",
                            *[f"127.0.0.1:{p}" for p in self.ports], "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
            deadline = time.time() + 20
            while not all("cluster_state:ok" in redis_cli(p, "CLUSTER", "INFO") for p in self.ports):
                if time.time() > deadline:
                    raise RuntimeError("the cluster did not reach cluster_state:ok")
                time.sleep(0.1)

    def ledger_keys(self):
        if self.cluster:
            nodes = ", ".join(f'"redis://127.0.0.1:{p}"' for p in self.ports)
            return f'backend = "redis-cluster"\nredis_cluster_nodes = [{nodes}]'
        return f'backend = "redis"\nredis_url = "redis://127.0.0.1:{self.ports[0]}"'

    def counters(self):
        """(script calls, CPU seconds) summed over every server."""
        calls, cpu = 0, 0.0
        for port in self.ports:
            for line in redis_cli(port, "INFO", "all").splitlines():
                if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                    calls += int(line.split("calls=")[1].split(",")[0])
                elif line.startswith(("used_cpu_user:", "used_cpu_sys:")):
                    cpu += float(line.split(":")[1])
        return calls, cpu

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


CONFIGS = [
    ("redis per-bid", 0, "per-bid"),
    ("redis lease", 0, "lease"),
    ("cluster per-bid", 3, "per-bid"),
    ("cluster lease", 3, "lease"),
]


def measure(masters, mode, rate, seconds):
    store = Store(masters)
    try:
        with tempfile.TemporaryDirectory() as d:
            ledger = f'{store.ledger_keys()}\nredis_mode = "{mode}"\nlease_chunk = 5.0'
            config, port, _ = write_config(d, CAMPAIGNS, ledger, "off")
            subprocess.run([GAVEL, "ledger", "create", "--config", config], check=True,
                           capture_output=True, timeout=60)
            with Proc(["bidder", "--config", config], SERVER_CORE, ready="listening",
                      timeout=120) as b:
                url = f"http://127.0.0.1:{port}/openrtb2/bid"
                gavel_load(url, ["--rate", rate, "--duration", "2s"])
                c0, (calls0, rcpu0) = b.cpu_seconds(), store.counters()
                r = gavel_load(url, ["--rate", rate, "--duration", f"{seconds}s", "--connections",
                                     256, "--max-connections", 256, "--timeout", "1s"])
                cpu = b.cpu_seconds() - c0
                calls1, rcpu1 = store.counters()
    finally:
        store.stop()
    decided = max(r["sent"], 1)
    return {"decisions_per_s": r["success_share"] * r["sent"] / seconds,
            "success": r["success_share"], "p99_ms": r["latency_ms"]["p99"],
            "bidder_cpu_us": 1e6 * cpu / decided,
            "redis_calls_per_decision": (calls1 - calls0) / decided,
            "redis_cpu_us_per_decision": 1e6 * (rcpu1 - rcpu0) / decided}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,3000", help="fixed open-loop rates, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, choices=range(1, 6), metavar="1..5")
    ap.add_argument("--seconds", type=int, default=5, choices=range(1, 61), metavar="1..60")
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run only this configuration (repeatable): " +
                    ", ".join(name for name, _, _ in CONFIGS))
    args = ap.parse_args()
    configs = [c for c in CONFIGS if not args.only or c[0] in args.only]
    if not configs:
        sys.exit(f"--only: no such configuration; the names are {[c[0] for c in CONFIGS]}")
    rates = [int(x) for x in args.rates.split(",")]
    runs = {name: {rate: [] for rate in rates} for name, _, _ in configs}
    for rnd in range(args.rounds):
        for rate in rates:
            for name, masters, mode in configs:
                with contextlib.redirect_stdout(sys.stderr):
                    m = measure(masters, mode, rate, args.seconds)
                runs[name][rate].append(m)
                print(f"round {rnd + 1} {rate}/s {name}: {m['decisions_per_s']:.0f} decided/s, "
                      f"bidder {m['bidder_cpu_us']:.1f} µs, redis {m['redis_calls_per_decision']:.3f} "
                      f"calls {m['redis_cpu_us_per_decision']:.1f} µs per decision, "
                      f"p99 {m['p99_ms']:.2f} ms", flush=True)
                settle(2)
    print("\n| ledger | rate/s | decided/s | success | p99 ms | bidder CPU µs/decision | "
          "Redis script calls/decision | Redis CPU µs/decision |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, _, _ in configs:
        for rate in rates:
            ms = runs[name][rate]

            def med(k):
                return statistics.median(m[k] for m in ms)

            print(f"| {name} | {rate} | {med('decisions_per_s'):.0f} | {med('success'):.4f} | "
                  f"{med('p99_ms'):.2f} | {med('bidder_cpu_us'):.1f} | "
                  f"{med('redis_calls_per_decision'):.3f} | {med('redis_cpu_us_per_decision'):.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rates": rates, "rounds": args.rounds, "seconds": args.seconds,
                       "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
