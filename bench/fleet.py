"""An exchange on core 0 with a simulated bidder fleet on core 1, for one scenario."""
import os, re, subprocess, tempfile, time

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
        lines.append("[[bidders]]")
        for k, v in b.items():
            lines.append(f'{k} = "{v}"' if k == "name" else f"{k} = {v}")
    return "\n".join(lines) + "\n"


class Exchange:
    """`with Exchange(bidders) as ex:` starts the fleet and the exchange (with `floor=True`,
    `gavel baseline --bidders` over the same fleet instead); `ex.url`, `ex.metrics()`,
    `ex.cpu_seconds()`, `ex.fleet_cpu_seconds()`. `server_binary`: another build of gavel for
    the server only (the fleet and the load generator stay this one), to compare builds.
    `lean_fleet` (default, but not with TLS): the bidders serve with `gavel sim --lean-http`,
    the same answers for less CPU on the core they share with the load generator.
    `privacy`: TCF enforced with examples/gvl.json, the bidders vendors 1..n (the generated
    EU requests carry consent strings for them); `openrtb_version`: every bidder's version.
    `records`: None, "file" (rotating NDJSON files in the run's temporary directory) or "nats"
    (a `nats-server -js` started here, on the load generator's core, with its store in the
    same directory)."""

    def __init__(self, bidders, max_connections=256, notices=True, admission="deadline", tls=False,
                 floor=False, server_core=SERVER_CORE, load_core=LOAD_CORE, threads=1,
                 fleet_threads=1, server_binary=None, lean_fleet=True, privacy=False,
                 openrtb_version=None, records=None):
        self.floor = floor
        self.nats = None
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        profiles, section = os.path.join(d, "profiles.toml"), os.path.join(d, "bidders.toml")
        open(profiles, "w").write(profiles_toml(bidders))
        tls_args = []
        if tls:
            ca, cert, key = certificates(d)
            tls_args = ["--tls-cert", cert, "--tls-key", key]
        self.fleet = Proc(["sim", "--profiles", profiles, "--write-bidders", section,
                           "--duration", "60m"] + tls_args + (["--lean-http"] if lean_fleet and not tls else []),
                          load_core, FLEET_NICE,
                          ready="wrote the [[bidders]]", threads=fleet_threads)
        port = free_port()
        fire = "true" if notices else "false"
        config = os.path.join(d, "exchange.toml")
        # Only the [[bidders]] tables of what `gavel sim` wrote; the settings come from here.
        written = open(section).read()
        bidders_section = written[written.index("[[bidders]]"):].replace(
            "max_connections = 64", f"max_connections = {max_connections}")
        if tls:
            # Every HTTPS bidder (and its notice host) verified against the test CA.
            bidders_section = bidders_section.replace(
                f"max_connections = {max_connections}\n",
                f"max_connections = {max_connections}\nca_file = \"{ca}\"\n")
        if privacy:
            count = iter(range(1, 10_000))
            bidders_section = re.sub(
                r"max_connections = \d+\n",
                lambda m: f"{m.group(0)}gvl_vendor_id = {next(count)}\n", bidders_section)
        if openrtb_version:
            bidders_section = re.sub(
                r"max_connections = \d+\n",
                lambda m: f'{m.group(0)}openrtb_version = "{openrtb_version}"\n', bidders_section)
        gvl = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "gvl.json")
        privacy_section = f'[privacy]\ngvl_file = "{gvl}"\n\n' if privacy else ""
        records_section = ""
        if records == "file":
            records_section = f'[records]\nsink = "file"\ndir = "{os.path.join(d, "records")}"\n\n'
        elif records == "nats":
            nats_port = free_port()
            self.nats = subprocess.Popen(
                ["taskset", "-c", str(load_core), "nats-server", "-js", "-a", "127.0.0.1",
                 "-p", str(nats_port), "-sd", os.path.join(d, "nats")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            records_section = (f'[records]\nsink = "nats"\nnats_url = "nats://127.0.0.1:{nats_port}"\n'
                               f'spill_dir = "{os.path.join(d, "spill")}"\n\n')
        elif records is not None:
            raise ValueError(f"records: {records!r} is not file or nats")
        # Loopback load: open to every caller, notices to loopback allowed, and one address
        # may hold every connection the load generator opens.
        admin_port = free_port()
        open(config, "w").write(f'listen = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin_port}"\n'
                                'open_to_all_sellers = true\n'
                                f'\n[http]\nmax_connections_per_ip = 4096\n'
                                f'\n[admission]\nmode = "{admission}"\n\n'
                                f"[notices]\nfire_nurl = {fire}\nfire_burl = {fire}\n"
                                "allow_private_addresses = true\n\n"
                                + privacy_section + records_section + bidders_section)
        # The floor of the design: `gavel baseline` doing only an auction's I/O to the same
        # bidders over the same pools (issue 18).
        command = (["baseline", "--listen", f"127.0.0.1:{port}", "--bidders", config] if floor
                   else ["exchange", "--config", config])
        try:
            self.server = Proc(command, server_core, ready="listening", threads=threads,
                               binary=server_binary)
        except Exception:
            self.fleet.stop()
            if self.nats:
                self.nats.kill()
            raise
        self.url = f"http://127.0.0.1:{port}/openrtb2/auction"
        # /metrics is on the admin listener, never on the auction port.
        self.metrics_url = f"http://127.0.0.1:{admin_port}/metrics"

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
        if self.nats:
            self.nats.terminate()
            self.nats.wait(timeout=10)
        self.tmp.cleanup()


def certificates(d):
    """A CA and a certificate it signs for 127.0.0.1, made by openssl: (ca, cert, key)."""
    ca_key, ca, key, csr, cert, ext = (os.path.join(d, f) for f in
                                       ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt", "tls.ext"))
    open(ext, "w").write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench-ca",
        "-keyout", ca_key, "-out", ca)
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", key, "-out", csr)
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
        "-extfile", ext, "-out", cert)
    return ca, cert, key


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
