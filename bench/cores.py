#!/usr/bin/env python3
"""Does the exchange use every core it is given? Capacity and CPU per auction at 1, 2, ...
runtime threads, in one run (issue 18).

A lock or a shared counter contended on the hot path shows as CPU per auction rising with the
threads (time spent spinning, waiting on futexes and moving cache lines) and as capacity that
does not grow with the cores. The exchange (fan-out 10, instant bidders, admission off) runs on
`--server-cores` with `--threads` threads; the bidder fleet and `gavel load` on `--load-cores`.

On this 2-vCPU VM (no spare cores for the load at 2 threads, so compare CPU per auction, not
capacity):

    python3 bench/cores.py --threads 1,2 --server-cores 0 --server-cores-multi 0-1 --load-cores 1

On a 16-core host (exchange on 8 cores, fleet and load on the other 8):

    python3 bench/cores.py --threads 1,2,4,8 --server-cores 0 --server-cores-multi 0-7 \\
        --load-cores 8-15 --fleet-threads 4 --load-threads 4

Read: capacity(t) / capacity(1) should approach t where the load has its own cores, and CPU per
auction at t threads should stay within ~10% of one thread's. `perf record -g` on the exchange
at the highest thread count, then `perf report --sort symbol`, names the lock if it does not
(look for futex, `parking_lot`/`std::sync` lock slow paths and atomic read-modify-writes).
Loopback only, bounded: one capacity search per thread count."""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Exchange, instant  # noqa: E402
from procs import ROOT, gavel_load, settle  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2", help="runtime thread counts, comma-separated")
    ap.add_argument("--server-cores", default="0", help="taskset list for one thread")
    ap.add_argument("--server-cores-multi", default="0-1", help="taskset list for more threads")
    ap.add_argument("--load-cores", default="1", help="taskset list of the fleet and the load")
    ap.add_argument("--fleet-threads", type=int, default=1)
    ap.add_argument("--load-threads", type=int, default=1)
    ap.add_argument("--fanout", type=int, default=10)
    ap.add_argument("--trial-seconds", type=int, default=3)
    ap.add_argument("--start-rate", type=int, default=500)
    args = ap.parse_args()
    rows = []
    for t in (int(x) for x in args.threads.split(",")):
        cores = args.server_cores if t == 1 else args.server_cores_multi
        with Exchange(instant(args.fanout), admission="off", server_core=cores,
                      load_core=args.load_cores, threads=t, fleet_threads=args.fleet_threads) as ex:
            print(f"cores: exchange with {t} threads on cores {cores}", flush=True)
            before = ex.cpu_seconds()
            r = gavel_load(ex.url, ["--find-capacity", "--slo-p99", "10ms", "--rate", args.start_rate,
                                    "--duration", f"{args.trial_seconds}s", "--warmup", "1s",
                                    "--connections", 512, "--max-connections", 512, "--timeout", "1s"],
                           core=args.load_cores, threads=args.load_threads)
            cpu = ex.cpu_seconds() - before
            sent = sum(tr["rate"] * (args.trial_seconds + 1) for tr in r["trials"])
            rows.append({"threads": t, "cores": cores, "capacity": r["capacity"],
                         "cpu_us_per_auction": 1e6 * cpu / sent if sent else None,
                         "trials": [(tr["rate"], tr["passed"]) for tr in r["trials"]]})
        settle(3)
    one = rows[0]
    print("\n| threads | server cores | capacity/s | vs 1 thread | CPU per auction | vs 1 thread |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        cap = row["capacity"] or 0
        cpu = row["cpu_us_per_auction"] or 0
        print(f"| {row['threads']} | {row['cores']} | {cap:,.0f} | {cap / (one['capacity'] or 1):.2f} "
              f"| {cpu:.0f} µs | {cpu / (one['cpu_us_per_auction'] or 1):.2f} |")
    out = os.path.join(ROOT, "bench-results", "cores.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    json.dump({"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "rows": rows},
              open(out, "w"), indent=2)


if __name__ == "__main__":
    main()
