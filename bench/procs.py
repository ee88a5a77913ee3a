"""Process plumbing for the benchmark suite: pinned gavel processes, CPU time from /proc, load
runs through `gavel load --json`, and Prometheus scrapes. Loopback only."""
import json, os, resource, shutil, signal, socket, subprocess, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAVEL = os.environ.get("GAVEL_BIN") or os.path.join(ROOT, "target", "production", "gavel")
SERVER_CORE, LOAD_CORE = "0", "1"
# The bidder fleet shares core 1 with the load generator; every auction waits for its slowest
# bidder, so a fleet thread waiting behind the generator for its time slice would turn into
# auction latency. A higher priority keeps the measurement about the exchange.
FLEET_NICE = ["nice", "-n", "-10"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A gavel subcommand pinned to `core` (a taskset list) with a `threads`-thread runtime,
    stopped on exit."""

    def __init__(self, args, core, nice=(), ready=None, timeout=15, threads=1, binary=None):
        cmd = list(nice) + ["taskset", "-c", core, binary or GAVEL, "--threads", str(threads)] + args
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if ready:
            deadline = time.time() + timeout
            while time.time() < deadline:
                line = self.p.stdout.readline()
                if ready in line:
                    return
                if not line and self.p.poll() is not None:
                    break
            self.stop()
            raise RuntimeError(f"{' '.join(args[:1])}: {ready!r} not seen")

    def cpu_seconds(self):
        """utime + stime of the process so far, in seconds."""
        fields = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def gavel_load(url, args, core=LOAD_CORE, threads=1):
    """Runs `gavel load` pinned to `core` and returns its JSON report, with the CPU seconds the
    generator itself used (`generator_cpu_seconds`, user + system); its text goes to our
    stdout as it comes, indented."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        # --report-only: a benchmark reads the figures; a missed --slo or a LIMITED run is
        # data here, not a failure (without it `gavel load` exits 3 or 4).
        cmd = ["taskset", "-c", core, GAVEL, "--threads", str(threads), "load", "--url", url,
               "--no-progress", "--report-only", "--json", out.name] + [str(a) for a in args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            print("    " + line.rstrip(), flush=True)
        if p.wait() != 0:
            raise RuntimeError(f"gavel load failed: {' '.join(cmd)}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = json.load(open(out.name))
        # Only this child was waited for in between (the fleet and servers are waited for when
        # they stop), so the difference is the generator's.
        report["generator_cpu_seconds"] = (after.ru_utime - before.ru_utime
                                           + after.ru_stime - before.ru_stime)
        return report


def wrk(url, connections, seconds, script=None, core=LOAD_CORE):
    """wrk's closed-loop throughput (requests/s), or None when wrk is not installed."""
    if not shutil.which("wrk"):
        return None
    cmd = ["taskset", "-c", core, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        print("    " + line, flush=True)
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError("wrk printed no Requests/sec line")


def scrape(url):
    """Prometheus text → {(metric, labels): value}."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        name, _, labels = key.partition("{")
        out[(name, labels.rstrip("}"))] = float(value)
    return out


def settle(seconds=5):
    """Lets sockets in TIME_WAIT and the kernel's queues drain between runs."""
    time.sleep(seconds)
