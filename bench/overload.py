"""The overload scenarios of the suite: the exchange (fan-out 10 or 50, instant bidders, default
admission: by deadline since issue 18) driven open-loop at 1x, 2x, 3x and 5x its capacity (measured with the gate
off, on a separate exchange). Each level is one `gavel load` run on a fresh gated exchange's
connections: 5 s of warm-up at half the capacity, the overload, then a stretch at half the
capacity again (falling rate steps). The overload thus starts on open connections and a warm
process, as a rise in traffic does on a live exchange, and recovery is seen by the same
connections that saw the overload.

Per level: share of requests answered within tmax, goodput (auctions that ran, fanned out and
answered in time, per second of the overload step, as a share of the capacity; the exchange's
counters are scraped at the end of the step), what was shed, the exchange's peak RSS (sampled every
100 ms), the admission bound at the end of the overload, and the recovery time: seconds from
the end of the overload until the first second whose p99 is back within the capacity SLO with
no errors (and how many later seconds went over again)."""
import threading, time

from fleet import Exchange, instant
from procs import gavel_load, settle

LEVELS = (1, 2, 3, 5)
TMAX_MS = 100
WARMUP_S = 5


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class PeakRss:
    """Samples a process's resident memory every 100 ms in a thread while in the `with`."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
            except OSError:
                return
            self.stop.wait(0.1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def delta(before, after, name, labels=""):
    return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)


def recovery_seconds(timeline, from_second, slo_ms):
    """Seconds after `from_second` until the first second with p99 <= slo_ms and no errors
    (None when none comes), and how many later seconds went over again: the recovery
    stretch's own p99 and share within tmax say whether it stayed back."""
    later = [s for s in timeline if s["second"] >= from_second and s["sent"] > 0]
    ok = [s["p99_ms"] <= slo_ms and s["errors"] == 0 for s in later]
    if True not in ok:
        return None, None
    first = ok.index(True)
    return later[first]["second"] - from_second, ok[first:].count(False)


class Target:
    """What the level loop needs of a server under test: its URL, a scrape, its process id,
    its metric prefix, and how many requests of a scrape delta ran to the end (goodput)."""

    def __init__(self, url, metrics, pid, prefix, ran, fleet_cpu=None):
        self.url, self.metrics, self.pid, self.prefix, self.ran = url, metrics, pid, prefix, ran
        # CPU seconds of the bidder fleet so far, when the target has one (it shares core 1
        # with the load generator).
        self.fleet_cpu = fleet_cpu

    def requests_seen(self, scraped):
        name = f"{self.prefix}_requests_total"
        return sum(v for (m, _), v in scraped.items() if m == name)


def scrape_at_step_end(target, before, seconds, into):
    """Scrapes the server `seconds` after its first request of the run (polled every 20 ms,
    since `gavel load` takes a moment to start): at the end of the warm-up and the overload
    step, so that the counters cover both and nothing of the recovery; the caller subtracts a
    scrape taken at the end of the warm-up."""
    seen, deadline = target.requests_seen(before), time.time() + 30
    while target.requests_seen(target.metrics()) <= seen and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(seconds)
    into.update(target.metrics())
    if target.fleet_cpu:
        into[("fleet_cpu_seconds", "")] = target.fleet_cpu()


def exchange_ran(before, after):
    """Auctions that ran (fanned out and answered in time): bids and no-bids, less the
    requests answered at once for lack of time and the late ones."""
    req = "gavel_exchange_requests_total"
    return (delta(before, after, req, 'outcome="bid"') + delta(before, after, req, 'outcome="no_bid"')
            - delta(before, after, "gavel_exchange_no_time_left_total")
            - delta(before, after, "gavel_exchange_late_answers_total"))


def run_levels(target, c, seconds, slo_ms):
    """Every level of LEVELS against `target` (capacity `c`/s): one `gavel load` run each."""
    p = target.prefix
    levels = []
    for k in LEVELS:
        settle(3)
        high, low = round(k * c), round(0.5 * c)
        print(f"overload {k}x: {low}/s warm-up for {WARMUP_S} s, {high}/s for {seconds} s, "
              f"then {low}/s for {seconds} s", flush=True)
        # The counters at the end of the warm-up and at the end of the overload step, scraped
        # mid-run, so that what was shed and ran is the overload's own.
        idle = target.metrics()
        before, after = {}, {}
        timers = [threading.Thread(target=scrape_at_step_end, args=(target, idle, WARMUP_S, before)),
                  threading.Thread(target=scrape_at_step_end,
                                   args=(target, idle, WARMUP_S + seconds, after))]
        with PeakRss(target.pid) as rss:
            for t in timers:
                t.start()
            run = gavel_load(target.url, ["--rate", f"{high}:{low}:{high - low}",
                                          "--step-duration", f"{seconds}s",
                                          "--warmup", f"{WARMUP_S}s", "--warmup-rate", low,
                                          "--connections", 2048, "--max-connections", 2048, "--timeout", "1s",
                                          "--tmax", TMAX_MS, "--slo", f"{TMAX_MS}ms"])
            for t in timers:
                t.join()
        over, rec = run["steps"][0], run["steps"][1]
        back, over_again = recovery_seconds(run["timeline"], seconds, slo_ms)
        codes = over["status"]["by_code"]
        ran = target.ran(before, after)
        late = f"{p}_late_answers_total"
        # Core 1 during the overload step: the fleet as measured, the generator at its CPU per
        # request over the whole run (warm-up and recovery included) times the offered rate.
        issued = run["sent"] + low * WARMUP_S   # `sent` counts the measured window only
        gen_us = run["generator_cpu_seconds"] / issued * 1e6
        fleet_s = delta(before, after, "fleet_cpu_seconds") if target.fleet_cpu else 0.0
        core1 = fleet_s / seconds + gen_us * 1e-6 * high
        levels.append({
            "multiple": k, "offered": high, "achieved": over["rate_achieved"],
            "within_tmax": over.get("within_slo"),
            "success": over["success_share"],
            "goodput": ran / over["duration_s"],
            "goodput_share_of_capacity": ran / over["duration_s"] / c,
            "with_bid": codes.get("200", 0),
            "shed": delta(before, after, f"{p}_requests_total", 'outcome="shed"'),
            "too_little_time": delta(before, after, f"{p}_admission_total", 'outcome="too_little_time"'),
            "late_answers": delta(before, after, late) if (late, "") in after else None,
            "p50": over["latency_ms"]["p50"], "p99": over["latency_ms"]["p99"],
            "p999": over["latency_ms"]["p999"], "max": over["latency_ms"]["max"],
            "unanswered": over["sent"] - sum(codes.values()),
            "admission_limit_after": after.get((f"{p}_admission_limit", "")),
            "lagging_windows": delta(before, after, f"{p}_admission_lagging_windows_total"),
            "peak_rss_mib": rss.peak / 1024,
            "schedule_lag_p99_ms": run["schedule_lag_ms"]["p99"],
            "generator_cpu_us_per_request": gen_us,
            "fleet_cpu_share": fleet_s / seconds if target.fleet_cpu else None,
            "core1_needed_share": core1,
            "timeline": [{k: t[k] for k in ("second", "sent", "completed", "errors", "p99_ms", "max_ms")}
                         for t in run["timeline"]],
            "recovery": {"rate": low, "within_tmax": rec.get("within_slo"),
                         "p99": rec["latency_ms"]["p99"],
                         "seconds": back, "seconds_over_after": over_again},
        })
    return levels


def run_overload(args, ctx, capacity, slo_ms, fanout=10, start=500):
    seconds = args.level_seconds
    # Capacity is the auction path's, measured with the gate off: a shed request is answered
    # 204 at once, so with the gate on the search would count shedding as capacity.
    with Exchange(instant(fanout), max_connections=256, admission="off") as ex:
        print(f"overload: fan-out {fanout}, instant bidders; capacity first, admission off", flush=True)
        cap = capacity(ex.url, start, args, ex.cpu_seconds)
    c = cap["capacity"] or 1000
    settle(3)
    with Exchange(instant(fanout), max_connections=256) as ex:
        target = Target(ex.url, ex.metrics, ex.server.p.pid, "gavel_exchange", exchange_ran,
                        fleet_cpu=ex.fleet_cpu_seconds)
        levels = run_levels(target, c, seconds, slo_ms)
    base = ctx.get("baseline_capacity")
    return {"bidders": fanout, "tmax_ms": TMAX_MS, "capacity": c, "search": cap, "admission": "deadline",
            "baseline_capacity": base, "ratio_to_baseline": c / base if base else None,
            "warmup_seconds": WARMUP_S, "level_seconds": seconds,
            "levels": levels}
