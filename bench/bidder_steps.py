"""Builds of the bidder side by side in one run: CPU per bid request and p99 of each at the same
fixed rates, the builds alternating round by round (bench/steps.py does the same for the
exchange). `gavel bidder` with 10,000 campaigns and the in-memory ledger on core 0 (one-thread
runtime, admission off), `gavel load`'s built-in requests from core 1; loopback only, bounded:
each measurement is `--seconds` long after 2 s of warm-up.

    git worktree add /tmp/step-a <commit> && (cd /tmp/step-a && \\
        CARGO_TARGET_DIR=/tmp/step-a/target cargo build --profile production)
    python3 bench/bidder_steps.py --build before=/tmp/step-a/target/production/gavel \\
        --build after=target/production/gavel --rates 3000,6000 --rounds 3

Prints a table of medians; the load generator's own reports go to stderr."""
import argparse, contextlib, os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bidder import write_config  # noqa: E402
from procs import SERVER_CORE, Proc, gavel_load, settle  # noqa: E402

CAMPAIGNS = 10_000


def measure(binary, rate, seconds):
    with tempfile.TemporaryDirectory() as d:
        config, port, _ = write_config(d, CAMPAIGNS, 'backend = "memory"', "off")
        with Proc(["bidder", "--config", config], SERVER_CORE, ready="listening", timeout=120,
                  binary=binary) as b:
            url = f"http://127.0.0.1:{port}/openrtb2/bid"
            gavel_load(url, ["--rate", rate, "--duration", "2s"])
            c0 = b.cpu_seconds()
            r = gavel_load(url, ["--rate", rate, "--duration", f"{seconds}s", "--connections", 256,
                                 "--max-connections", 256, "--timeout", "1s"])
            cpu = b.cpu_seconds() - c0
    return {"cpu_us_per_request": 1e6 * cpu / r["sent"], "p99_ms": r["latency_ms"]["p99"],
            "success": r["success_share"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, metavar="NAME=PATH",
                    help="a gavel binary to run as the bidder; two or more")
    ap.add_argument("--rates", default="3000,6000", help="fixed open-loop rates, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, choices=range(1, 6), metavar="1..5")
    ap.add_argument("--seconds", type=int, default=5, choices=range(1, 61), metavar="1..60")
    args = ap.parse_args()
    builds = []
    for b in args.build:
        name, _, path = b.partition("=")
        if not os.access(path, os.X_OK):
            sys.exit(f"--build {name}: {path} is not an executable")
        builds.append((name, path))
    rates = [int(x) for x in args.rates.split(",")]
    runs = {name: {rate: [] for rate in rates} for name, _ in builds}
    for rnd in range(args.rounds):
        for rate in rates:
            for name, path in builds:
                with contextlib.redirect_stdout(sys.stderr):
                    m = measure(path, rate, args.seconds)
                runs[name][rate].append(m)
                print(f"round {rnd + 1} {rate}/s {name}: {m['cpu_us_per_request']:.1f} µs/request, "
                      f"p99 {m['p99_ms']:.2f} ms, success {m['success']:.4f}", file=sys.stderr,
                      flush=True)
                settle(1)
    print("| build | " + " | ".join(f"{r}/s: CPU per request, each round (median); p99 ms"
                                    for r in rates) + " |")
    print("| --- |" + " ---: |" * len(rates))
    for name, _ in builds:
        cells = []
        for r in rates:
            ms = runs[name][r]
            cpu = [m["cpu_us_per_request"] for m in ms]
            cells.append(" / ".join(f"{c:.1f}" for c in cpu)
                         + f" µs ({statistics.median(cpu):.1f}); "
                         + " / ".join(f"{m['p99_ms']:.2f}" for m in ms))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
