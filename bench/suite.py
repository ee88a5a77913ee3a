#!/usr/bin/env python3
"""The end-to-end benchmark suite: every scenario of BENCHMARKS.md in one command.

    cargo build --profile production && python3 bench/suite.py        # ~30 minutes (overload ~6, overload-50 ~4, fuzz ~6), loopback only

The server under test runs on core 0 with a one-thread runtime; the load generator (and the
simulated bidders, at nice -10) run on core 1. Each run first measures the same-run baseline:
the capacity of `gavel baseline` (a bare hyper server that reads the body and answers 204) on
the same core, so every figure is also a ratio that survives a noisy machine. Capacity is
`gavel load --find-capacity`: the highest rate whose p99 stays within the SLO with >= 99.9%
answered 2xx. Writes bench-results/suite/<scenario>.json and regenerates the suite section of
BENCHMARKS.md.

    python3 bench/suite.py --only fanout-10 --trial-seconds 3     # one scenario, quicker
    python3 bench/suite.py --only overload --only overload-50 --repeat 3   # ~40 minutes
"""
import argparse, json, os, platform, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bidder import run_bidder, run_bidder_overload  # noqa: E402
from overload import run_overload  # noqa: E402
from floor import run_admission, run_floor  # noqa: E402
from fleet import Exchange, instant, per_bidder, realistic, silent  # noqa: E402
from procs import GAVEL, ROOT, SERVER_CORE, Proc, free_port, gavel_load, settle, wrk  # noqa: E402
import tables  # noqa: E402

RESULTS = os.path.join(ROOT, "bench-results", "suite")
FIXTURE = os.path.join(ROOT, "crates", "openrtb", "tests", "fixtures", "realistic-2.5k.json")
SLO_MS = 10


def capacity(url, start, args, measure=None, slo_ms=SLO_MS):
    """`gavel load --find-capacity`; returns its JSON, plus the server's CPU per request over
    the whole search when `measure` (a callable returning CPU seconds) is given, and the load
    generator's own."""
    before = measure() if measure else None
    r = gavel_load(url, ["--find-capacity", "--slo-p99", f"{slo_ms}ms", "--rate", start,
                         "--duration", f"{args.trial_seconds}s", "--warmup", "1s",
                         "--connections", 256, "--max-connections", 256, "--timeout", "1s"])
    sent = sum(t["rate"] * (args.trial_seconds + 1) for t in r["trials"])
    if measure:
        cpu = measure() - before
        r["server_cpu_us_per_request"] = 1e6 * cpu / sent if sent else None
    r["generator_cpu_us_per_request"] = 1e6 * r["generator_cpu_seconds"] / sent if sent else None
    return r


def summary(r):
    """The figures of one run that go in tables."""
    lat = r["latency_ms"]
    return {"offered": r.get("rate_offered"), "achieved": r["rate_achieved"], "p50": lat["p50"],
            "p99": lat["p99"], "p999": lat["p999"], "max": lat["max"],
            "success": r["success_share"]}


def run_baseline(args, ctx):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with Proc(["baseline", "--listen", f"127.0.0.1:{port}"], SERVER_CORE, ready="listening") as b:
        print("baseline: capacity of a bare HTTP server on core 0", flush=True)
        cap = capacity(url, 5000, args, b.cpu_seconds)
        settle()
        print("cross-check: closed loop, 16 connections, the 2.5 KB fixture, gavel load and "
              "wrk alternating", flush=True)
        check = crosscheck(url, args.check_seconds, FIXTURE)
    ctx["baseline_capacity"] = cap["capacity"]
    return {"capacity": cap["capacity"], "search": cap,
            "server_cpu_us_per_request": cap.get("server_cpu_us_per_request"),
            "generator_cpu_us_per_request": cap.get("generator_cpu_us_per_request"),
            "crosscheck": check}


def crosscheck(url, seconds, body=None, rounds=3):
    """Closed-loop throughput of gavel load and of wrk on the same target, 16 connections,
    alternating for `rounds` rounds; the medians are compared."""
    args = ["--closed-loop", "--connections", 16, "--duration", f"{seconds}s"]
    script = None
    if body:
        args += ["--requests", body]
        script = os.path.join(RESULTS, "post.lua")
        with open(script, "w") as f:
            f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                    f'wrk.body = io.open("{body}"):read("*a")\n')
    ours_all, theirs_all = [], []
    for _ in range(rounds):
        ours_all.append(gavel_load(url, args)["rate_achieved"])
        settle(2)
        theirs_all.append(wrk(url, 16, seconds, script))
        settle(2)
    ours = sorted(ours_all)[rounds // 2]
    theirs = None if None in theirs_all else sorted(theirs_all)[rounds // 2]
    return {"gavel_closed_loop_rps": ours, "wrk_rps": theirs,
            "rounds": {"gavel": ours_all, "wrk": theirs_all},
            "ratio": ours / theirs if theirs else None,
            "agree_within_10pct": abs(ours / theirs - 1) <= 0.10 if theirs else None}


def run_fanout(n, start):
    def scenario(args, ctx):
        # Capacity of the auction path: with the gate on, its shed 204s would pass as capacity.
        with Exchange(instant(n), admission="off") as ex:
            print(f"fan-out {n}: exchange on core 0, {n} instant bidders on core 1", flush=True)
            fleet0 = ex.fleet_cpu_seconds()
            cap = capacity(ex.url, start, args, ex.cpu_seconds)
            fleet_share = (ex.fleet_cpu_seconds() - fleet0) / sum(
                args.trial_seconds + 1 for _ in cap["trials"])
        base = ctx.get("baseline_capacity")
        return {"bidders": n, "capacity": cap["capacity"], "search": cap,
                "baseline_capacity": base,
                "ratio_to_baseline": cap["capacity"] / base if base and cap["capacity"] else None,
                "server_cpu_us_per_auction": cap.get("server_cpu_us_per_request"),
                "fleet_core_share": fleet_share}
    return scenario


def run_tls(args, ctx):
    """Fan-out 10 to instant bidders over kept-alive HTTPS (bidder calls and notices), beside
    the same fleet over plain HTTP, alternated in one run: what TLS costs the exchange."""
    out = {}
    for label, tls in (("plain", False), ("tls", True), ("plain-again", False), ("tls-again", True)):
        # hyper bidders on both sides: the lean server has no TLS, and the two must compare.
        with Exchange(instant(10), admission="off", tls=tls, lean_fleet=False) as ex:
            print(f"fan-out 10 over {label}: exchange on core 0, bidders on core 1", flush=True)
            before = ex.metrics()
            cap = capacity(ex.url, 500, args, ex.cpu_seconds)
            calls = per_bidder(before, ex.metrics())
        # A run whose bidder calls failed (a handshake refused, breakers open) answers fast
        # and would pass for capacity: the share of calls that came back with bids says.
        total = sum(sum(v for k, v in row.items() if k not in ("requests", "wins")) for row in calls.values())
        bids = sum(row.get("bid", 0.0) for row in calls.values())
        out[label] = {"capacity": cap["capacity"], "search": cap,
                      "server_cpu_us_per_auction": cap.get("server_cpu_us_per_request"),
                      "bid_share_of_calls": bids / total if total else None,
                      "calls": calls}
        settle()
    return tls_summary(out)


def tls_summary(out):
    """Best plain and best TLS capacity over the runs whose calls mostly came back with bids
    (at least half of them: the fleet bids on about two thirds); the others are kept, marked."""
    for r in out.values():
        r["valid"] = bool(r["capacity"]) and (r.get("bid_share_of_calls") or 0) >= 0.5
    best = lambda a, b: max((out[x]["capacity"] for x in (a, b) if out[x]["valid"]), default=None)
    plain, tls = best("plain", "plain-again"), best("tls", "tls-again")
    return {"fleet": "hyper", "runs": out, "plain_capacity": plain, "tls_capacity": tls,
            "tls_to_plain": tls / plain if plain and tls else None}


def run_crosscheck(args, ctx):
    """wrk and gavel load --closed-loop against a target that is the bottleneck: the exchange
    with no bidders decoding and validating the 2.5 KB fixture and answering 204."""
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        config = os.path.join(d, "exchange.toml")
        open(config, "w").write(f'listen = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{free_port()}"\n'
                                'open_to_all_sellers = true\n')
        with Proc(["exchange", "--config", config], SERVER_CORE, ready="listening"):
            print("cross-check on the exchange without bidders: closed loop, 16 connections, "
                  "the 2.5 KB fixture, gavel load and wrk alternating", flush=True)
            check = crosscheck(f"http://127.0.0.1:{port}/openrtb2/auction", args.check_seconds,
                               FIXTURE)
    return {"crosscheck": check}


def run_realistic(args, ctx):
    tmax = 100
    with Exchange(realistic(20), max_connections=512, admission="off") as ex:
        print("fan-out 20, bidder latency p50 20 ms / p99 80 ms, tmax 100 ms", flush=True)
        r = gavel_load(ex.url, ["--find-capacity", "--slo-p99", f"{tmax}ms", "--rate", 200,
                                "--duration", f"{args.trial_seconds}s", "--warmup", "1s",
                                "--connections", 1024, "--max-connections", 1024, "--timeout", "1s", "--tmax", tmax])
        cap = r["capacity"]
        loads = []
        for share in (0.5, 1.0, 1.5):
            settle()
            rate = max(1, round((cap or 100) * share))
            before = ex.metrics()
            run = gavel_load(ex.url, ["--rate", rate, "--duration", f"{args.level_seconds}s",
                                      "--warmup", "2s", "--connections", 2048, "--max-connections", 2048, "--timeout", "1s",
                                      "--tmax", tmax, "--slo", f"{tmax}ms"])
            bidders = per_bidder(before, ex.metrics())
            calls = sum(b.get("requests", 0) for b in bidders.values())
            timeouts = sum(b.get("timeout", 0) for b in bidders.values())
            loads.append({"share_of_capacity": share, "rate": rate, **summary(run),
                          "within_tmax": run["slo"]["share"],
                          "bidder_timeout_share": timeouts / calls if calls else None})
    return {"bidders": 20, "tmax_ms": tmax, "capacity_p99_within_tmax": cap, "search": r,
            "loads": loads}


def run_silent(args, ctx):
    """Ten instant bidders with and without an eleventh that never answers, at one rate."""
    tmax, rate = 100, args.silent_rate
    out = {"rate": rate, "tmax_ms": tmax, "runs": {}}
    for label, bidders in (("without", instant(10)), ("with", instant(10) + silent())):
        settle()
        with Exchange(bidders) as ex:
            print(f"ten instant bidders {label} a bidder that never answers, {rate}/s", flush=True)
            before = ex.metrics()
            run = gavel_load(ex.url, ["--rate", rate, "--duration", f"{args.level_seconds}s",
                                      "--warmup", "2s", "--connections", 512, "--max-connections", 512, "--timeout", "1s",
                                      "--tmax", tmax, "--slo", f"{tmax}ms"])
            bidders_seen = per_bidder(before, ex.metrics())
        others = {k: v for k, v in bidders_seen.items() if k != "silent"}
        total_req = sum(v.get("requests", 0) for v in others.values())
        out["runs"][label] = {
            **summary(run), "within_tmax": run["slo"]["share"],
            "others_requests": total_req,
            "others_bid_share": sum(v.get("bid", 0) for v in others.values()) / total_req if total_req else None,
            "others_timeouts": sum(v.get("timeout", 0) for v in others.values()),
            "others_wins": sum(v.get("wins", 0) for v in others.values()),
            "silent": bidders_seen.get("silent")}
    return out


def run_fuzz(args, ctx):
    """Every cargo-fuzz target for --fuzz-seconds each (bench/fuzz.py), its figures recorded."""
    out = os.path.join(RESULTS, "fuzz-run.json")
    print(f"fuzz: every target for {args.fuzz_seconds} s (bench/fuzz.py)", flush=True)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "fuzz.py"),
                        "--seconds", str(args.fuzz_seconds), "--json", out])
    if not os.path.exists(out):
        raise RuntimeError(f"bench/fuzz.py wrote no results (exit {p.returncode})")
    report = json.load(open(out))
    os.remove(out)
    return {"fuzz": report, "exit_code": p.returncode}


SCENARIOS = {
    "baseline": run_baseline,
    "crosscheck": run_crosscheck,
    "fanout-1": run_fanout(1, 2000),
    "fanout-10": run_fanout(10, 500),
    "fanout-50": run_fanout(50, 100),
    "fanout-10-tls": run_tls,
    "realistic-20": run_realistic,
    "silent-bidder": run_silent,
    "bidder": lambda args, ctx: run_bidder(args, ctx, capacity),
    "overload": lambda args, ctx: run_overload(args, ctx, capacity, SLO_MS),
    # Where a refusal costs a small share of an auction: what the gate does once the rig
    # (generator and bidders on one core) is not the limit.
    "overload-50": lambda args, ctx: run_overload(args, ctx, capacity, SLO_MS, fanout=50, start=100),
    "bidder-overload": lambda args, ctx: run_bidder_overload(args, ctx, capacity),
    "fuzz": run_fuzz,
    # Issue 18: the exchange against the floor of its design (fan-out 1-100), and admission by
    # deadline against the adaptive bound (open loop to 80% of capacity, closed loop).
    "floor": lambda args, ctx: run_floor(args, ctx, capacity),
    "admission": lambda args, ctx: run_admission(args, ctx, capacity),
}


# Scenarios run --repeat times; their JSON holds {"runs": [...]}.
REPEATABLE = ("overload", "overload-50", "bidder-overload", "admission")


def save(name, result, meta, started, ctx):
    result.setdefault("baseline_capacity", ctx.get("baseline_capacity"))
    fleet = result.get("fleet", meta["fleet"])
    result.update(meta, scenario=name, wall_seconds=round(time.time() - started), fleet=fleet)
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"{name}: done in {result['wall_seconds']} s", flush=True)


def machine():
    model = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} vCPU {model}, {platform.system()} {platform.release()}, {rustc}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=list(SCENARIOS), action="append")
    ap.add_argument("--trial-seconds", type=int, default=5, help="length of each capacity trial")
    ap.add_argument("--level-seconds", type=int, default=10, help="length of each fixed-rate run")
    ap.add_argument("--check-seconds", type=int, default=10, help="length of each cross-check run")
    ap.add_argument("--silent-rate", type=int, default=500, help="rate of the silent-bidder runs")
    ap.add_argument("--fuzz-seconds", type=int, default=30, help="fuzzing time per target")
    ap.add_argument("--repeat", type=int, default=1, choices=range(1, 6), metavar="1..5",
                    help="run the overload scenarios this many times, alternated with each other; "
                         "their tables show every run side by side")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args()
    if not os.path.exists(GAVEL):
        sys.exit("build first: cargo build --profile production")
    os.makedirs(RESULTS, exist_ok=True)
    names = args.only or list(SCENARIOS)
    if "baseline" not in names:
        names = ["baseline"] + names   # every scenario's ratio needs the same-run baseline
    ctx, meta = {}, {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "fleet": "lean",
                     "command": "python3 bench/suite.py " + " ".join(sys.argv[1:]),
                     "slo_p99_ms": SLO_MS, "trial_seconds": args.trial_seconds}
    once = [nm for nm in names if nm not in REPEATABLE]
    repeated = [nm for nm in names if nm in REPEATABLE]
    for name in once:
        started = time.time()
        result = SCENARIOS[name](args, ctx)
        save(name, result, meta, started, ctx)
        settle()
    # The overload scenarios alternate (A B A B ...), so that a slow spell of the machine
    # touches each of them rather than all runs of one; every run is kept.
    runs, started = {name: [] for name in repeated}, time.time()
    for k in range(args.repeat):
        for name in repeated:
            print(f"{name}: run {k + 1} of {args.repeat}", flush=True)
            runs[name].append(SCENARIOS[name](args, ctx))
            settle()
    for name in repeated:
        save(name, {"runs": runs[name], "repeat": args.repeat}, meta, started, ctx)
    if not args.no_markdown:
        tables.rewrite(os.path.join(ROOT, "BENCHMARKS.md"), RESULTS)
        print("BENCHMARKS.md: suite section regenerated")


if __name__ == "__main__":
    main()
