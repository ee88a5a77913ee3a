"""The creative edge against nginx's proxy_cache, side by side in one run, over the same origin.

    python3 bench/edge.py [--seconds 5] [--rounds 2] [--out bench-results/edge.json] \
        [--gavel NAME=PATH ...]   # several gavel builds side by side (default: this checkout's)

For each server (`gavel edge` and nginx from Debian's packages, configured as nginx's
documentation recommends for a caching proxy: keepalive upstream, `proxy_cache_lock`,
`sendfile`, one worker), alternating round by round:
- hits: 1 KB, 50 KB and 1 MB objects, warmed, then `wrk -t1 -c32 --latency` and `ab -k -c32`
  as a cross-check; throughput, p99, and hits per second of the server's own CPU;
- a herd: 100 clients ask for one cold 1 MB object at once; the origin sends its first bytes
  after 20 ms and the rest over 500 ms; time to first byte per client and the origin's count.

Server on core 0 (`--threads 1`; nginx `worker_processes 1`), origin and load on core 1,
loopback only, every run bounded. Needs nginx, wrk and ab (`apt-get install -y nginx wrk
apache2-utils`). Writes JSON to --out and prints a table."""
import argparse, asyncio, json, os, platform, shutil, statistics, subprocess, sys, tempfile, threading, time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import GAVEL, LOAD_CORE, SERVER_CORE, Proc, free_port, settle  # noqa: E402

SIZES = {"1k": 1_000, "50k": 50_000, "1m": 1_000_000}
HERD = 100
FIRST_BYTE_S, BODY_S = 0.020, 0.500


# --- the origin: asyncio HTTP/1.1, keep-alive, counts requests by path -----------------------

class Origin:
    def __init__(self):
        self.counts = {}
        self.bodies = {k: bytes((i * 31 + n) & 0xFF for i in range(n)) for k, n in SIZES.items()}
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/o/ping-1", timeout=1).read()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("origin did not start")

    def _run(self):
        # The origin runs on core 1 with the load; it only works on misses.
        os.sched_setaffinity(0, {int(LOAD_CORE)})
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.loop.run_until_complete(server.serve_forever())

    async def _serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                self.counts[path] = self.counts.get(path, 0) + 1
                parts = path.rsplit("/", 1)[-1].split("-")
                kind, size = parts[0], parts[1] if len(parts) > 1 else ""
                body = self.bodies.get(size, b"x" * 100)
                writer.write((f"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {len(body)}\r\n"
                              "Cache-Control: max-age=3600\r\n\r\n").encode())
                if kind == "cold":
                    # A slow origin: first bytes after 20 ms, the rest over 500 ms.
                    await asyncio.sleep(FIRST_BYTE_S)
                    step = len(body) // 10
                    for i in range(10):
                        writer.write(body[i * step:(i + 1) * step if i < 9 else len(body)])
                        await writer.drain()
                        await asyncio.sleep(BODY_S / 10)
                else:
                    writer.write(body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def count(self, path):
        return self.counts.get(path, 0)


# --- the servers under test --------------------------------------------------------------------

class GavelEdge:
    def __init__(self, origin_port, tmp, name="gavel edge", binary=None):
        self.name = name
        self.port = free_port()
        conf = os.path.join(tmp, "edge.toml")
        with open(conf, "w") as f:
            f.write(f'listen = "127.0.0.1:{self.port}"\nadmin_listen = "127.0.0.1:{free_port()}"\n[memory]\nmax_bytes = 536870912\n'
                    f'max_object_bytes = 2000000\n[[origins]]\nname = "cdn"\n'
                    f'url = "http://127.0.0.1:{origin_port}/o"\nmax_connections = 32\n')
        self.proc = Proc(["edge", "--config", conf], SERVER_CORE, ready="listening", binary=binary)

    def cpu_seconds(self):
        return self.proc.cpu_seconds()

    def stop(self):
        self.proc.stop()


class Nginx:
    name = "nginx proxy_cache"

    def __init__(self, origin_port, tmp):
        self.port = free_port()
        root = os.path.join(tmp, "nginx")
        os.makedirs(os.path.join(root, "cache"), exist_ok=True)
        conf = os.path.join(root, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
user root;
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    proxy_cache_path {root}/cache levels=1:2 keys_zone=edge:64m max_size=2g inactive=60m use_temp_path=off;
    upstream origin {{ server 127.0.0.1:{origin_port}; keepalive 32; }}
    server {{
        listen 127.0.0.1:{self.port};
        location /assets/cdn/ {{
            proxy_pass http://origin/o/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache edge;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 10s;
            proxy_cache_valid 200 10m;
            proxy_cache_use_stale error timeout updating http_500 http_502 http_503 http_504;
            add_header X-Cache $upstream_cache_status;
        }}
    }}
}}
""")
        self.p = subprocess.Popen(["taskset", "-c", SERVER_CORE, "nginx", "-c", conf, "-p", root],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/assets/cdn/ping-1", timeout=1).read()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def pids(self):
        out = subprocess.run(["pgrep", "-P", str(self.p.pid)], capture_output=True, text=True).stdout
        return [self.p.pid] + [int(x) for x in out.split()]

    def cpu_seconds(self):
        total = 0.0
        for pid in self.pids():
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                pass
        return total

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


# --- measurements ------------------------------------------------------------------------------

def wrk_hits(server, url, seconds):
    c0 = server.cpu_seconds()
    out = subprocess.run(["taskset", "-c", LOAD_CORE, "wrk", "-t1", "-c32", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    cpu = server.cpu_seconds() - c0
    rps, p99 = None, None
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("Requests/sec:"):
            rps = float(parts[1])
        elif parts[:1] == ["99%"]:
            p99 = to_ms(parts[1])
    return {"rps": rps, "p99_ms": p99, "hits_per_cpu_second": rps * seconds / cpu if cpu else None,
            "cpu_share": cpu / seconds}


def ab_hits(url, requests):
    out = subprocess.run(["taskset", "-c", LOAD_CORE, "ab", "-k", "-q", "-n", str(requests), "-c", "32", url],
                         capture_output=True, text=True, check=True).stdout
    rps, p99, failed = None, None, None
    for line in out.splitlines():
        if line.startswith("Requests per second:"):
            rps = float(line.split()[3])
        elif line.strip().startswith("99%"):
            p99 = float(line.split()[1])
        elif line.startswith("Failed requests:"):
            failed = int(line.split()[2])
    return {"rps": rps, "p99_ms": p99, "failed": failed}


def to_ms(text):
    for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


async def one_client(port, path, start):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await start.wait()
    sent = time.perf_counter()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    first = await reader.read(1)
    ttfb = time.perf_counter() - sent
    rest = await reader.read()
    done = time.perf_counter() - sent
    writer.close()
    ok = head.startswith(b"HTTP/1.1 200") and len(first) + len(rest) == SIZES["1m"]
    return ttfb, done, ok


def herd(server, origin, tag):
    name = f"cold-1m{tag}"
    path = f"/assets/cdn/{name}"

    async def run():
        start = asyncio.Event()
        tasks = [asyncio.create_task(one_client(server.port, path, start)) for _ in range(HERD)]
        await asyncio.sleep(0.2)
        start.set()
        return await asyncio.gather(*tasks)

    os.sched_setaffinity(0, {int(LOAD_CORE)})
    results = asyncio.run(run())
    ttfb = sorted(r[0] * 1000 for r in results)
    done = sorted(r[1] * 1000 for r in results)
    return {"ttfb_p50_ms": statistics.median(ttfb), "ttfb_max_ms": ttfb[-1],
            "complete_p50_ms": statistics.median(done), "ok": sum(r[2] for r in results),
            "origin_fetches": origin.count(f"/o/{name}")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join("bench-results", "edge.json"))
    ap.add_argument("--gavel", action="append", metavar="NAME=PATH",
                    help="a gavel binary to run as the edge; repeat to compare builds in one run")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.gavel] if args.gavel else [("gavel edge", GAVEL)]
    kinds = [lambda port, d, n=n, b=b: GavelEdge(port, d, f"gavel {n}" if args.gavel else n, b)
             for n, b in builds] + [Nginx]
    for tool in ("nginx", "wrk", "ab"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install -y nginx wrk apache2-utils")
    origin = Origin()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for k, kind in enumerate(kinds):
                workdir = os.path.join(tmp, f"server{k}-{rnd}")
                os.makedirs(workdir)
                server = kind(origin.port, workdir)
                try:
                    row = {"server": server.name, "round": rnd, "hits": {}}
                    for size in SIZES:
                        url = f"http://127.0.0.1:{server.port}/assets/cdn/obj-{size}"
                        urllib.request.urlopen(url, timeout=5).read()
                        print(f"{server.name} round {rnd}: hits on {size}", flush=True)
                        row["hits"][size] = {"wrk": wrk_hits(server, url, args.seconds),
                                             "ab": ab_hits(url, 20_000 if size != "1m" else 4_000)}
                        settle(1)
                    row["herd"] = herd(server, origin, f"-server{k}-{rnd}")
                    runs.append(row)
                finally:
                    server.stop()
                settle(2)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "nginx": subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip(),
            "command": " ".join(sys.argv)}
    json.dump({"meta": meta, "runs": runs}, open(args.out, "w"), indent=1)
    print(f"\n{'server':18} {'size':5} {'wrk req/s':>10} {'p99 ms':>7} {'hits/CPU-s':>11} {'ab req/s':>9} {'ab p99':>7}")
    for r in runs:
        for size, h in r["hits"].items():
            w, a = h["wrk"], h["ab"]
            print(f"{r['server']:18} {size:5} {w['rps']:>10.0f} {w['p99_ms']:>7.2f} "
                  f"{w['hits_per_cpu_second'] or 0:>11.0f} {a['rps']:>9.0f} {a['p99_ms'] or 0:>7.0f}")
    print(f"\n{'server':18} {'round':5} {'TTFB p50':>9} {'TTFB max':>9} {'done p50':>9} {'ok':>4} {'origin fetches':>15}")
    for r in runs:
        h = r["herd"]
        print(f"{r['server']:18} {r['round']:5} {h['ttfb_p50_ms']:>9.1f} {h['ttfb_max_ms']:>9.1f} "
              f"{h['complete_p50_ms']:>9.1f} {h['ok']:>4} {h['origin_fetches']:>15}")


if __name__ == "__main__":
    main()
