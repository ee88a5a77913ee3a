"""Issue 18's scenarios: the exchange against the floor of its own design, and admission judged
by deadlines.

`floor`: for fan-out 1, 10, 20, 50 and 100 (instant bidders), the capacity of `gavel baseline
--bidders` (read the request, send every bidder a small pre-encoded request over the exchange's
own pools, read every answer, answer 204) and of the exchange (admission off), one after the
other with fresh fleets, in the same run. The ratio is the exchange's share of the floor.

`admission`: the exchange at fan-out 10 with the gate under test (the default `deadline`, and
the previous default `adaptive` beside it): open loop at 20-80% of the capacity measured with
the gate off (target: 0 sheds), then closed loop with 32, 256 and 1,024 connections (target:
completed within tmax >= 90% of the gate-off throughput, refusals < 10% of what is answered).
tmax 500 ms, as in the issue's measurements."""
from fleet import Exchange, instant
from overload import delta
from procs import gavel_load, settle

FANOUTS = (1, 10, 20, 50, 100)
START = {1: 2000, 10: 500, 20: 250, 50: 100, 100: 50}
OPEN_SHARES = (0.2, 0.4, 0.6, 0.8)
CLOSED_CONNECTIONS = (32, 256, 1024)
TMAX_MS = 500


def slo_ms(n):
    """The capacity SLO by fan-out: at 50 and 100 bidders one auction's own I/O on this 2-core
    VM (the fleet answering 50-100 calls in turn on one core) already puts p99 near 10 ms at
    20 auctions/s, so those are searched at p99 <= 30 ms."""
    return 10 if n <= 20 else 30


def bidder_calls(ex):
    """The exchange's bidder calls so far: (sent, lost), lost = skipped (pool full, breaker
    open, rate cap) or ended in a timeout or error. The floor (`gavel baseline`) has no
    metrics: it answers 502 when a call is lost, so the search counts those itself."""
    if ex.floor:
        return 0, 0
    m = ex.metrics()
    total = lambda name, pred=lambda labels: True: sum(v for (k, labels), v in m.items()
                                                        if k == name and pred(labels))
    lost = total("gavel_exchange_bidder_skips_total") + total(
        "gavel_exchange_bidder_responses_total",
        lambda labels: any(f'outcome="{o}"' in labels for o in ("timeout", "error")))
    return total("gavel_exchange_bidder_requests_total"), lost


def searched(ex, n, args, capacity):
    """A capacity search, then one more run at the capacity found: `valid` is false when the
    exchange lost more than 0.1% of its bidder calls in it (a saturated fleet trips breakers,
    and the fast no-bids that follow would count as capacity)."""
    fleet0 = ex.fleet_cpu_seconds()
    cap = capacity(ex.url, START[n], args, ex.cpu_seconds, slo_ms=slo_ms(n))
    wall = sum(args.trial_seconds + 1 for _ in cap["trials"])
    fleet_share = (ex.fleet_cpu_seconds() - fleet0) / wall
    sent0, lost0 = bidder_calls(ex)
    if cap["capacity"]:
        gavel_load(ex.url, ["--rate", cap["capacity"], "--duration", f"{args.trial_seconds}s",
                            "--connections", 256, "--max-connections", 256, "--timeout", "1s"])
    sent1, lost1 = bidder_calls(ex)
    sent, lost = sent1 - sent0, lost1 - lost0
    return {"capacity": cap["capacity"], "search": cap,
            "server_cpu_us_per_request": cap.get("server_cpu_us_per_request"),
            "fleet_core_share": fleet_share, "bidder_calls_at_capacity": sent,
            "bidder_calls_lost_at_capacity": lost, "valid": lost <= 0.001 * (sent + lost)}


def cpu_at(ex, rate, seconds):
    """Server and fleet CPU per request at a fixed open-loop rate."""
    c0, f0 = ex.cpu_seconds(), ex.fleet_cpu_seconds()
    r = gavel_load(ex.url, ["--rate", rate, "--duration", f"{seconds}s", "--connections", 512, "--max-connections", 512,
                            "--timeout", "1s", "--tmax", 500])
    return {"rate": rate, "server_cpu_us_per_request": 1e6 * (ex.cpu_seconds() - c0) / r["sent"],
            "fleet_cpu_us_per_request": 1e6 * (ex.fleet_cpu_seconds() - f0) / r["sent"],
            "p99": r["latency_ms"]["p99"], "success": r["success_share"]}


def run_floor(args, ctx, capacity):
    """Capacities first; then, since at fan-out 50 and 100 the one-core fleet is the limit of
    both, CPU per request of each at the same fixed rate (half the lower capacity)."""
    rows = []
    for n in FANOUTS:
        row = {"bidders": n, "slo_p99_ms": slo_ms(n)}
        for kind in ("floor", "exchange"):
            with Exchange(instant(n), admission="off", floor=kind == "floor") as ex:
                print(f"floor: fan-out {n}, {kind} on core 0, instant bidders on core 1", flush=True)
                row[kind] = searched(ex, n, args, capacity)
            settle(3)
        f, e = row["floor"]["capacity"], row["exchange"]["capacity"]
        row["ratio"] = e / f if e and f else None
        rate = max(10, round(0.5 * min(f or 0, e or 0)))
        for kind in ("floor", "exchange"):
            with Exchange(instant(n), admission="off", floor=kind == "floor") as ex:
                gavel_load(ex.url, ["--rate", rate, "--duration", "1s"])
                row[kind]["fixed_rate"] = cpu_at(ex, rate, args.level_seconds)
            settle(3)
        fe = row["exchange"]["fixed_rate"]["server_cpu_us_per_request"]
        ff = row["floor"]["fixed_rate"]["server_cpu_us_per_request"]
        row["cpu_ratio_at_fixed_rate"] = ff / fe if fe else None
        rows.append(row)
    return {"rows": rows}


def counters(before, after):
    req = "gavel_exchange_requests_total"
    return {k: delta(before, after, req, f'outcome="{k}"') for k in ("bid", "no_bid", "shed")} | {
        "no_time_left": delta(before, after, "gavel_exchange_no_time_left_total"),
        "late_answers": delta(before, after, "gavel_exchange_late_answers_total"),
        "started_after_wait": delta(before, after, "gavel_exchange_admission_started_after_wait_total")}


def one_load(ex, load_args):
    """One `gavel load` run; the exchange's counters over it. Auctions completed in tmax are
    the exchange's bids and no-bids less its late answers (server side, from the read), per
    second; the client's share within tmax (`within_tmax`) counts fast refusals as in time."""
    before = ex.metrics()
    r = gavel_load(ex.url, ["--tmax", TMAX_MS, "--slo", f"{TMAX_MS}ms", "--timeout", "2s"] + load_args)
    after = ex.metrics()
    c = counters(before, after)
    refused = c["shed"] + c["no_time_left"]
    answered = c["bid"] + c["no_bid"]
    return {"offered": r.get("rate_offered"), "achieved": r["rate_achieved"],
            "within_tmax": r["slo"]["share"], "p50": r["latency_ms"]["p50"],
            "p99": r["latency_ms"]["p99"],
            "completed_in_tmax_per_s": (answered - c["late_answers"]) / r["duration_s"],
            "refused_share_of_answered": refused / answered if answered else None,
            **c}


def closed_loop(ex, conns, args):
    print(f"closed loop, {conns} connections", flush=True)
    r = one_load(ex, ["--closed-loop", "--connections", conns, "--duration", f"{args.level_seconds}s"])
    r["connections"] = conns
    return r


def run_admission(args, ctx, capacity, fanout=10):
    """Two capacities, both with the gate off: the open-loop one (p99 <= 10 ms) sets the open
    loop's rates; the throughput one (auctions completed per second under a closed loop of 32
    connections, where queueing stays far inside tmax) is what closed-loop completions are a
    share of. The gate-off closed loop at 256 and 1,024 connections is kept beside the gated
    ones: it shows what the gate is for (every request served, late)."""
    with Exchange(instant(fanout), admission="off") as ex:
        print(f"admission: fan-out {fanout}; capacity first, admission off", flush=True)
        cap = searched(ex, fanout, args, capacity)
        off = [closed_loop(ex, conns, args) for conns in CLOSED_CONNECTIONS]
    c = cap["capacity"] or 1000
    throughput = off[0]["completed_in_tmax_per_s"] or 1
    for r in off:
        r["completed_share_of_capacity"] = (r["completed_in_tmax_per_s"] or 0) / throughput
    modes = {"off": {"open": [], "closed": off}}
    for mode in ("deadline", "adaptive"):
        settle(3)
        with Exchange(instant(fanout), admission=mode) as ex:
            levels = []
            for share in OPEN_SHARES:
                rate = round(share * c)
                print(f"admission {mode}: open loop {rate}/s ({share:.0%} of {c}/s)", flush=True)
                levels.append({"share": share, **one_load(ex, ["--rate", rate, "--duration",
                                                                f"{args.level_seconds}s",
                                                                "--connections", 512, "--max-connections", 512])})
            closed = []
            for conns in CLOSED_CONNECTIONS:
                print(f"admission {mode}: ", end="", flush=True)
                r = closed_loop(ex, conns, args)
                r["completed_share_of_capacity"] = (r["completed_in_tmax_per_s"] or 0) / throughput
                closed.append(r)
        modes[mode] = {"open": levels, "closed": closed}
    return {"bidders": fanout, "tmax_ms": TMAX_MS, "capacity": c, "throughput": throughput,
            "search": cap["search"], "modes": modes}
