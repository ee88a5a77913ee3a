"""The bidder scenario of the suite: `gavel bidder` on core 0 (one-thread runtime) with 10,000 or
100,000 campaigns and an in-memory ledger, and with 10,000 campaigns on a Redis ledger in lease
mode (redis-server on core 1, beside the load generator), driven by `gavel load`'s built-in
requests; capacity at p99 <= 5 ms. Also the bidder-overload scenario (`run_bidder_overload`): the
levels of bench/overload.py against the bidder with its admission gate on. The campaigns are
generated here, seeded, to match the generator's requests: its countries, sizes, device types
and site domains."""
import json, os, random, shutil, socket, subprocess, tempfile, time

from overload import TMAX_MS, WARMUP_S, Target, delta, run_levels
from procs import GAVEL, LOAD_CORE, SERVER_CORE, Proc, free_port, scrape, settle

SLO_MS = 5
COUNTRIES = ["USA", "USA", "USA", "GBR", "CAN", "DEU", "FRA", "AUS", "BRA", "IND", "JPN", "ESP",
             "ITA", "NLD", "MEX"]
SIZES = [(300, 250), (300, 250), (728, 90), (320, 50), (300, 600), (160, 600), (970, 250),
         (320, 480)]
DOMAINS = ["dailyharbor.com", "kitchenfolio.com", "gridironwire.com", "pixelpatch.net",
           "wanderlogjournal.com", "marketsledger.com", "stylecanvas.co", "autotorque.com",
           "homeandhearth.com", "playtrail.gg"]


def campaigns(n, seed=11):
    """`n` campaigns with budgets too large to run out during a benchmark: asap, no flight."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        targeting = {}
        if rng.random() < 0.9:
            targeting["countries"] = rng.sample(COUNTRIES, rng.randint(1, 2))
        if rng.random() < 0.5:
            targeting["device_types"] = rng.sample([1, 2, 3, 4, 5, 6, 7], rng.randint(1, 3))
        if rng.random() < 0.2:
            targeting["domains"] = rng.sample(DOMAINS, rng.randint(1, 3))
        if rng.random() < 0.1:
            targeting["block_domains"] = rng.sample(DOMAINS, 1)
        if rng.random() < 0.3:
            start = rng.randrange(24)
            targeting["hours"] = sorted({(start + k) % 24 for k in range(rng.randint(6, 18))})
        creatives = []
        for j in range(rng.randint(1, 3)):
            w, h = rng.choice(SIZES)
            creatives.append({"id": f"c{i}-cr{j}", "w": w, "h": h,
                              "adm": f"<a href='https://brand{i}.example'>ad {i}</a>"})
        out.append({"id": f"c{i}", "adomain": [f"brand{i % 1000}.example"], "pacing": "asap",
                    "budget": {"total": 1_000_000}, "bid": {"cpm": rng.randint(50, 1000) / 100},
                    "targeting": targeting, "creatives": creatives})
    return out


class Redis:
    """A throwaway redis-server on a free port, pinned beside the load generator."""

    def __init__(self):
        if not shutil.which("redis-server"):
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.port = free_port()
        self.p = subprocess.Popen(["taskset", "-c", LOAD_CORE, "redis-server", "--port",
                                   str(self.port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no"], stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait()


def write_config(d, n, ledger, admission, signed=True):
    """campaigns.json (`n` campaigns) and bidder.toml in `d` (notices signed with a fresh key
    unless `signed` is false); returns (config path, port, admin port)."""
    with open(os.path.join(d, "campaigns.json"), "w") as f:
        json.dump(campaigns(n), f)
    key = os.path.join(d, "notice.key")
    with open(key, "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(key, 0o600)
    security = 'notice_key_file = "notice.key"' if signed else "sign_notices = false"
    port = free_port()
    admin_port = free_port()
    path = os.path.join(d, "bidder.toml")
    with open(path, "w") as f:
        f.write(f'listen = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin_port}"\n'
                f'campaigns = "campaigns.json"\nnode = "bench"\n'
                f'[admission]\nmode = "{admission}"\n[ledger]\n{ledger}\n[security]\n{security}\n')
    return path, port, admin_port


def variant(name, n, label, ledger, args, capacity, signed=True):
    """Capacity of one bidder configuration; returns its figures."""
    with tempfile.TemporaryDirectory() as d:
        # The gate off: its shed answers are 204s, which the capacity search would count.
        config, port, _ = write_config(d, n, ledger, "off", signed)
        if 'backend = "redis' in ledger:
            # A start never creates a ledger: the operator's act, as in production.
            subprocess.run([GAVEL, "ledger", "create", "--config", config], check=True,
                           capture_output=True, timeout=60)
        print(f"{name}: gavel bidder with {n} campaigns on core 0", flush=True)
        with Proc(["bidder", "--config", config], SERVER_CORE, ready="listening", timeout=120) as b:
            url = f"http://127.0.0.1:{port}/openrtb2/bid"
            cap = capacity(url, 2000, args, b.cpu_seconds, slo_ms=SLO_MS)
    return {"campaigns": n, "ledger": label, "capacity": cap["capacity"],
            "search": cap, "server_cpu_us_per_request": cap.get("server_cpu_us_per_request")}


def bidder_ran(before, after):
    """Requests decided to the end: bids and no-bids, less those answered at once for lack
    of time (counted as no-bids too)."""
    req = "gavel_bidder_requests_total"
    return (delta(before, after, req, 'outcome="bid"') + delta(before, after, req, 'outcome="no_bid"')
            - delta(before, after, "gavel_bidder_admission_total", 'outcome="too_little_time"'))


def run_bidder_overload(args, ctx, capacity):
    """`gavel bidder` (10,000 campaigns, in-memory ledger, default adaptive admission) at 1x,
    2x, 3x and 5x its capacity (found with the gate off), as bench/overload.py drives the
    exchange. At 5x the generator on core 1 nears its own ceiling (the same-run baseline), so
    its lag is part of the figures."""
    n, seconds = 10_000, args.level_seconds
    with tempfile.TemporaryDirectory() as d:
        config, port, _ = write_config(d, n, 'backend = "memory"', "off")
        print(f"bidder overload: {n} campaigns; capacity first, admission off", flush=True)
        with Proc(["bidder", "--config", config], SERVER_CORE, ready="listening", timeout=120) as b:
            cap = capacity(f"http://127.0.0.1:{port}/openrtb2/bid", 2000, args, b.cpu_seconds,
                           slo_ms=SLO_MS)
        c = cap["capacity"] or 1000
        settle(3)
        config, port, admin_port = write_config(d, n, 'backend = "memory"', "adaptive")
        with Proc(["bidder", "--config", config], SERVER_CORE, ready="listening", timeout=120) as b:
            base_url = f"http://127.0.0.1:{port}"
            metrics_url = f"http://127.0.0.1:{admin_port}/metrics"
            target = Target(f"{base_url}/openrtb2/bid", lambda: scrape(metrics_url), b.p.pid,
                            "gavel_bidder", bidder_ran)
            levels = run_levels(target, c, seconds, SLO_MS)
    base = ctx.get("baseline_capacity")
    return {"campaigns": n, "ledger": "memory", "tmax_ms": TMAX_MS, "capacity": c, "search": cap,
            "slo_p99_ms_here": SLO_MS, "baseline_capacity": base,
            "ratio_to_baseline": c / base if base else None,
            "warmup_seconds": WARMUP_S, "level_seconds": seconds, "levels": levels}


def run_bidder(args, ctx, capacity):
    runs = {
        "memory-10k": variant("memory-10k", 10_000, "memory", 'backend = "memory"', args, capacity),
        # Signing's end-to-end cost: the same bidder with unsigned notice URLs, same run.
        "memory-10k-unsigned": variant("memory-10k-unsigned", 10_000, "memory, notices unsigned",
                                       'backend = "memory"', args, capacity, signed=False),
        "memory-100k": variant("memory-100k", 100_000, "memory", 'backend = "memory"', args,
                               capacity),
    }
    redis = Redis()
    try:
        runs["redis-lease-10k"] = variant(
            "redis-lease-10k", 10_000, "redis, leases of 5.0 (redis-server on core 1)",
            f'backend = "redis"\nredis_url = "redis://127.0.0.1:{redis.port}"\nlease_chunk = 5.0',
            args, capacity)
    finally:
        redis.stop()
    return {"bidder_slo_p99_ms": SLO_MS, "runs": runs,
            "baseline_capacity": ctx.get("baseline_capacity")}
