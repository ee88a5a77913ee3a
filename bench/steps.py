"""Builds of the exchange side by side in one run: CPU per auction and p99 of each at the same
fixed rates, fan-out 10, instant bidders, the builds alternating round by round. This is how a
change's gain is measured against the step before it (issue 18): each build is a `gavel`
binary from its own worktree; the fleet and the load generator are this checkout's.

    git worktree add /tmp/step-a <commit> && (cd /tmp/step-a && \\
        CARGO_TARGET_DIR=/tmp/step-a/target cargo build --profile production)
    python3 bench/steps.py --build before=/tmp/step-a/target/production/gavel \\
        --build after=target/production/gavel --rates 2000,4000 --rounds 2

Exchange on core 0 (`--threads 1`), fleet and generator on core 1, loopback only, bounded:
each measurement is `--seconds` long after 2 s of warm-up. Writes the runs as JSON to `--out`
(default bench-results/steps.json) and prints a table of medians (the load generator's own
reports go to stderr)."""
import argparse, contextlib, json, os, platform, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Exchange, instant  # noqa: E402
from procs import gavel_load, settle  # noqa: E402


def measure(binary, fanout, rate, seconds, notices=True, floor=False, lean_fleet=True,
            privacy=False, openrtb_version=None, records=None):
    with Exchange(instant(fanout), admission="off", server_binary=binary, notices=notices,
                  floor=floor, lean_fleet=lean_fleet, privacy=privacy,
                  openrtb_version=openrtb_version, records=records) as ex:
        gavel_load(ex.url, ["--rate", rate, "--duration", "2s"])
        c0, f0 = ex.cpu_seconds(), ex.fleet_cpu_seconds()
        m0 = ex.metrics()
        r = gavel_load(ex.url, ["--rate", rate, "--duration", f"{seconds}s", "--connections", 512, "--max-connections", 512,
                                "--timeout", "1s", "--tmax", 500])
        cpu, fleet = ex.cpu_seconds() - c0, ex.fleet_cpu_seconds() - f0
        m1 = ex.metrics()
    counter = lambda m, name: sum(v for (n, _), v in m.items() if n == name)
    record_bytes = counter(m1, "gavel_exchange_record_bytes_total") - counter(m0, "gavel_exchange_record_bytes_total")
    dropped = counter(m1, "gavel_exchange_records_dropped_total") - counter(m0, "gavel_exchange_records_dropped_total")
    return {"record_bytes_per_auction": record_bytes / r["sent"], "records_dropped": dropped,"cpu_us_per_auction": 1e6 * cpu / r["sent"], "fleet_us_per_auction": 1e6 * fleet / r["sent"],
            "generator_us_per_request": 1e6 * r["generator_cpu_seconds"] / r["sent"],
            "p99_ms": r["latency_ms"]["p99"], "success": r["success_share"],
            "status": r["status"]["by_code"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, metavar="NAME=PATH[,OPTION]",
                    help="a gavel binary to run as the exchange; two or more, in step order. "
                         "Options: no-notices (win and billing notices off), floor (`gavel "
                         "baseline --bidders` instead of the exchange: the I/O of the fan-out only), "
                         "hyper-fleet (the bidders on hyper rather than `gavel sim --lean-http`), "
                         "privacy (TCF enforced: examples/gvl.json, the bidders vendors 1..n), "
                         "v25 (every bidder speaks OpenRTB 2.5: a converted copy per auction), "
                         "records-file and records-nats (auction and notice records to rotating "
                         "files, or to a NATS JetStream started for the run). "
                         "The same binary may be named twice with different options")
    ap.add_argument("--rates", default="2000,4000", help="fixed open-loop rates, comma-separated")
    ap.add_argument("--fanout", type=int, default=10, choices=range(1, 101), metavar="1..100")
    ap.add_argument("--rounds", type=int, default=2, choices=range(1, 6), metavar="1..5")
    ap.add_argument("--seconds", type=int, default=5, choices=range(1, 61), metavar="1..60")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "bench-results", "steps.json"))
    args = ap.parse_args()
    builds, options = [], {}
    for b in args.build:
        name, _, spec = b.partition("=")
        path, *opts = spec.split(",")
        if not os.access(path, os.X_OK):
            sys.exit(f"--build {name}: {path} is not an executable")
        known = {"no-notices", "floor", "hyper-fleet", "privacy", "v25", "records-file", "records-nats"}
        if set(opts) - known:
            sys.exit(f"--build {name}: unknown option in {opts} ({', '.join(sorted(known))})")
        builds.append((name, path))
        options[name] = {"notices": "no-notices" not in opts, "floor": "floor" in opts,
                         "lean_fleet": "hyper-fleet" not in opts, "privacy": "privacy" in opts,
                         "openrtb_version": "2.5" if "v25" in opts else None,
                         "records": "file" if "records-file" in opts else "nats" if "records-nats" in opts else None}
    rates = [int(x) for x in args.rates.split(",")]
    runs = {name: {rate: [] for rate in rates} for name, _ in builds}
    for rnd in range(args.rounds):
        for rate in rates:
            for name, path in builds:
                with contextlib.redirect_stdout(sys.stderr):
                    m = measure(path, args.fanout, rate, args.seconds, **options[name])
                runs[name][rate].append(m)
                print(f"round {rnd + 1} {rate}/s {name}: {m['cpu_us_per_auction']:.0f} µs/auction, "
                      f"p99 {m['p99_ms']:.1f} ms, {m['record_bytes_per_auction']:.0f} record bytes/auction, "
                      f"{m['records_dropped']:.0f} records dropped", file=sys.stderr, flush=True)
                settle(1)
    med = lambda ms, k: statistics.median(m[k] for m in ms)
    summary = {name: {rate: {"cpu_us_per_auction_median": med(ms, "cpu_us_per_auction"),
                             "fleet_us_per_auction_median": med(ms, "fleet_us_per_auction"),
                             "generator_us_per_request_median": med(ms, "generator_us_per_request"),
                             "p99_ms": [m["p99_ms"] for m in ms]}
                      for rate, ms in by_rate.items()} for name, by_rate in runs.items()}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
                   "command": " ".join(sys.argv), "fanout": args.fanout, "builds": dict(builds),
                   "summary": summary, "runs": runs}, f, indent=1)
    print(f"| build | " + " | ".join(f"{r}/s: CPU per auction, fleet, generator (medians of "
                                     f"{args.rounds}); p99 ms" for r in rates) + " |")
    print("| --- |" + " ---: |" * len(rates))
    for name, _ in builds:
        cells = [f"{summary[name][r]['cpu_us_per_auction_median']:.0f} µs, "
                 f"{summary[name][r]['fleet_us_per_auction_median']:.0f} µs, "
                 f"{summary[name][r]['generator_us_per_request_median']:.0f} µs; "
                 + " / ".join(f"{p:.1f}" for p in summary[name][r]["p99_ms"]) for r in rates]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
