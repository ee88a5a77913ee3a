"""The overload scenarios of the suite: the exchange (fan-out 10 or 50, instant bidders, default
adaptive admission) driven open-loop at 1x, 2x, 3x and 5x its capacity (measured with the gate
off, after which a fresh exchange is warmed up at half capacity), each overload
followed at once by a stretch at half the capacity in the same `gavel load` run (falling rate
steps), so that recovery is seen by the same connections that saw the overload.

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


def requests_seen(metrics):
    return sum(v for (name, _), v in metrics.items() if name == "gavel_exchange_requests_total")


def scrape_at_step_end(ex, before, seconds, into):
    """Scrapes the exchange `seconds` after its first request of the step (polled every 20 ms,
    since `gavel load` takes a moment to start), so that the counters cover the step alone."""
    seen, deadline = requests_seen(before), time.time() + 30
    while requests_seen(ex.metrics()) <= seen and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(seconds)
    into.update(ex.metrics())


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
        # A fresh process opens its pools and learns what an auction costs at half capacity
        # first, as the capacity search's process did; its figures are not kept.
        print(f"overload: warm-up at {round(0.5 * c)}/s for 5 s", flush=True)
        gavel_load(ex.url, ["--rate", round(0.5 * c), "--duration", "5s", "--connections", 2048,
                            "--timeout", "1s", "--tmax", TMAX_MS])
        levels = []
        for k in LEVELS:
            settle(3)
            high, low = round(k * c), round(0.5 * c)
            print(f"overload {k}x: {high}/s for {seconds} s, then {low}/s for {seconds} s", flush=True)
            before = ex.metrics()
            # The exchange's counters at the end of the overload step, scraped mid-run, so that
            # what it shed and ran is the overload's own.
            scraped = {}
            timer = threading.Thread(target=scrape_at_step_end, args=(ex, before, seconds, scraped))
            with PeakRss(ex.server.p.pid) as rss:
                timer.start()
                run = gavel_load(ex.url, ["--rate", f"{high}:{low}:{high - low}",
                                          "--step-duration", f"{seconds}s",
                                          "--connections", 2048, "--timeout", "1s",
                                          "--tmax", TMAX_MS, "--slo", f"{TMAX_MS}ms"])
                timer.join()
            after = scraped
            over, rec = run["steps"][0], run["steps"][1]
            back, over_again = recovery_seconds(run["timeline"], seconds, slo_ms)
            codes = over["status"]["by_code"]
            req = "gavel_exchange_requests_total"
            # Auctions that ran (fanned out and answered in time): bids and no-bids, less the
            # requests answered at once for lack of time and the late ones.
            ran = (delta(before, after, req, 'outcome="bid"') + delta(before, after, req, 'outcome="no_bid"')
                   - delta(before, after, "gavel_exchange_no_time_left_total")
                   - delta(before, after, "gavel_exchange_late_answers_total"))
            levels.append({
                "multiple": k, "offered": high, "achieved": over["rate_achieved"],
                "within_tmax": over.get("within_slo"),
                "success": over["success_share"],
                "goodput": ran / over["duration_s"],
                "goodput_share_of_capacity": ran / over["duration_s"] / c,
                "with_bid": codes.get("200", 0),
                "shed": delta(before, after, req, 'outcome="shed"'),
                "no_time_left": delta(before, after, "gavel_exchange_no_time_left_total"),
                "late_answers": delta(before, after, "gavel_exchange_late_answers_total"),
                "p50": over["latency_ms"]["p50"], "p99": over["latency_ms"]["p99"],
                "p999": over["latency_ms"]["p999"], "max": over["latency_ms"]["max"],
                "unanswered": over["sent"] - sum(codes.values()),
                "admission_limit_after": after.get(("gavel_exchange_admission_limit", "")),
                "lagging_windows": delta(before, after, "gavel_exchange_admission_lagging_windows_total"),
                "peak_rss_mib": rss.peak / 1024,
                "schedule_lag_p99_ms": run["schedule_lag_ms"]["p99"],
                "timeline": [{k: t[k] for k in ("second", "sent", "completed", "errors", "p99_ms", "max_ms")}
                             for t in run["timeline"]],
                "recovery": {"rate": low, "within_tmax": rec.get("within_slo"),
                             "p99": rec["latency_ms"]["p99"],
                             "seconds": back, "seconds_over_after": over_again},
            })
    base = ctx.get("baseline_capacity")
    return {"bidders": fanout, "tmax_ms": TMAX_MS, "capacity": c, "search": cap,
            "baseline_capacity": base, "ratio_to_baseline": c / base if base else None, "level_seconds": seconds,
            "levels": levels}
