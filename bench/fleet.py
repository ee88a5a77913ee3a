"""An exchange on core 0 with a simulated bidder fleet on core 1, for one scenario."""
import os, tempfile

from procs import FLEET_NICE, LOAD_CORE, SERVER_CORE, Proc, free_port, scrape


def instant(n, prefix="i"):
    """Bidders that answer at once and always bid, at varied prices: every auction has a
    winner and fires its notices."""
    return [{"name": f"{prefix}{k}", "price": '{ kind = "uniform", min = 0.5, max = 3.0 }'}
            for k in range(n)]


def realistic(n, p50_ms=20, p99_ms=80):
    """Bidders with log-normal answer times (p50 20 ms, p99 80 ms) that bid 70% of the time."""
    return [{"name": f"r{k}", "price": '{ kind = "lognormal", median = 1.2, p99 = 6.0 }',
             "latency": f'{{ kind = "lognormal", p50_ms = {p50_ms}, p99_ms = {p99_ms} }}',
             "bid_probability": "0.7"} for k in range(n)]


def silent(name="silent"):
    """A bidder that accepts every request and never answers it."""
    return [{"name": name, "price": '{ kind = "fixed", cpm = 1.0 }', "no_answer_rate": "1.0",
             "hang_ms": "60000"}]


def profiles_toml(bidders):
    lines = []
    for b in bidders:
        lines.append("[[bidder]]")
        for k, v in b.items():
            lines.append(f'{k} = "{v}"' if k == "name" else f"{k} = {v}")
    return "\n".join(lines) + "\n"


class Exchange:
    """`with Exchange(bidders) as ex:` starts the fleet and the exchange; `ex.url`,
    `ex.metrics()`, `ex.cpu_seconds()`, `ex.fleet_cpu_seconds()`."""

    def __init__(self, bidders, max_connections=256, notices=True, admission="adaptive"):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        profiles, section = os.path.join(d, "profiles.toml"), os.path.join(d, "bidders.toml")
        open(profiles, "w").write(profiles_toml(bidders))
        self.fleet = Proc(["sim", "--profiles", profiles, "--write-bidders", section,
                           "--duration", "60m"], LOAD_CORE, FLEET_NICE, ready="wrote the [[bidders]]")
        port = free_port()
        fire = "true" if notices else "false"
        config = os.path.join(d, "exchange.toml")
        bidders_section = open(section).read().replace("max_connections = 64",
                                                       f"max_connections = {max_connections}")
        open(config, "w").write(f'listen = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{free_port()}"\n'
                                f'\n[admission]\nmode = "{admission}"\n\n'
                                f"[notices]\nfire_nurl = {fire}\nfire_burl = {fire}\n\n"
                                + bidders_section)
        try:
            self.server = Proc(["exchange", "--config", config], SERVER_CORE, ready="listening")
        except Exception:
            self.fleet.stop()
            raise
        self.url = f"http://127.0.0.1:{port}/openrtb2/auction"
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"

    def metrics(self):
        return scrape(self.metrics_url)

    def cpu_seconds(self):
        return self.server.cpu_seconds()

    def fleet_cpu_seconds(self):
        return self.fleet.cpu_seconds()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.stop()
        self.fleet.stop()
        self.tmp.cleanup()


def per_bidder(before, after):
    """Per-bidder deltas of the exchange's counters between two scrapes:
    {bidder: {"requests", "bid", "no_bid", "timeout", "error", "skipped", ..., "wins"}}."""
    out = {}
    for (name, labels), value in after.items():
        if 'bidder="' not in labels:
            continue
        fields = dict(kv.split("=", 1) for kv in labels.split(","))
        bidder = fields["bidder"].strip('"')
        delta = value - before.get((name, labels), 0.0)
        row = out.setdefault(bidder, {})
        if name == "gavel_exchange_bidder_requests_total":
            row["requests"] = delta
        elif name == "gavel_exchange_bidder_responses_total":
            row[fields["outcome"].strip('"')] = delta
        elif name == "gavel_exchange_wins_total":
            row["wins"] = row.get("wins", 0.0) + delta
    return out
