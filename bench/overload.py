"""The overload scenario of the suite: the exchange (fan-out 10, instant bidders, default
adaptive admission) driven open-loop at 1x, 2x, 3x and 5x its measured capacity, each overload
followed at once by a stretch at half the capacity in the same `gavel load` run (falling rate
steps), so that recovery is seen by the same connections that saw the overload.

Per level: share of requests answered within tmax, goodput (auctions that ran, fanned out and
answered in time, per second of the overload step, as a share of the capacity; the exchange's
counters are scraped at the end of the step), what was shed, the exchange's peak RSS (sampled every
100 ms), the admission bound at the end of the overload, and the recovery time: seconds from
the end of the overload until every later second of the recovery stretch has p99 within the
capacity SLO and no errors."""
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
    """Seconds after `from_second` until every later second keeps p99 <= slo_ms without errors;
    None when the stretch never settles."""
    later = [s for s in timeline if s["second"] >= from_second]
    settled = None
    for s in reversed(later):
        if s["p99_ms"] <= slo_ms and s["errors"] == 0 and s["sent"] > 0:
            settled = s["second"]
        else:
            break
    return None if settled is None else settled - from_second


def run_overload(args, ctx, capacity, slo_ms):
    seconds = args.level_seconds
    with Exchange(instant(10), max_connections=256) as ex:
        print("overload: fan-out 10, instant bidders; capacity first", flush=True)
        cap = capacity(ex.url, 500, args, ex.cpu_seconds)
        c = cap["capacity"] or 1000
        levels = []
        for k in LEVELS:
            settle(3)
            high, low = round(k * c), round(0.5 * c)
            print(f"overload {k}x: {high}/s for {seconds} s, then {low}/s for {seconds} s", flush=True)
            before = ex.metrics()
            # The exchange's counters at the end of the overload step, scraped mid-run, so that
            # what it shed and ran is the overload's own.
            scraped = {}
            timer = threading.Timer(seconds + 0.05, lambda: scraped.update(ex.metrics()))
            with PeakRss(ex.server.p.pid) as rss:
                timer.start()
                run = gavel_load(ex.url, ["--rate", f"{high}:{low}:{high - low}",
                                          "--step-duration", f"{seconds}s",
                                          "--connections", 2048, "--timeout", "1s",
                                          "--tmax", TMAX_MS, "--slo", f"{TMAX_MS}ms"])
                timer.join()
            after = scraped
            over, rec = run["steps"][0], run["steps"][1]
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
                "peak_rss_mib": rss.peak / 1024,
                "schedule_lag_p99_ms": run["schedule_lag_ms"]["p99"],
                "recovery": {"rate": low, "within_tmax": rec.get("within_slo"),
                             "p99": rec["latency_ms"]["p99"],
                             "seconds": recovery_seconds(run["timeline"], seconds, slo_ms)},
            })
    base = ctx.get("baseline_capacity")
    return {"bidders": 10, "tmax_ms": TMAX_MS, "capacity": c, "search": cap,
            "baseline_capacity": base, "ratio_to_baseline": c / base if base else None, "level_seconds": seconds,
            "levels": levels}
