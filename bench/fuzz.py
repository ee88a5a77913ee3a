#!/usr/bin/env python3
"""Bounded fuzzing of every cargo-fuzz target, one after the other: seed, build, run each for a
fixed time, report what libFuzzer measured. Exits non-zero if any target crashed (or timed out
on an input, or ran out of memory).

    python3 bench/fuzz.py                          # 11 targets x 30 s, plus the builds
    python3 bench/fuzz.py --only notice_params --seconds 120 --json /tmp/fuzz.json

Each target runs single-process (no -jobs/-workers) with -max_total_time, -max_len (its input
bound), -rss_limit_mb, a per-input -timeout and its dictionary. All targets of a fuzz directory
are built once, first (`cargo fuzz build`), and their binaries are run directly. The corpus
(<fuzz dir>/corpus/<t>/, git-ignored) keeps growing from run to run; the inputs under
<fuzz dir>/regressions/<t>/ are executed in the initial corpus load of every run and never
written to. A crash leaves its input in <fuzz dir>/artifacts/<t>/ and the whole libFuzzer log
in <fuzz dir>/target/logs/<t>.log. With --strict the gavel-fuzz targets are built with the
`strict` feature: the checks of open findings (docs/FUZZING.md) run too.
Needs cargo-fuzz (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP=1 is set for it.
"""
import argparse, json, os, platform, re, shutil, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPENRTB = os.path.join("crates", "openrtb", "fuzz")
GAVEL = "fuzz"

# name: (fuzz dir relative to ROOT, dictionary in that dir or None, -max_len). The bounds sit
# above the largest seed and above every limit a parser checks itself within reach (a notice
# query's 2048 bytes), and keep one input's work small.
TARGETS = {
    "request_decode": (OPENRTB, "openrtb.dict", 16384),
    "response_decode": (OPENRTB, "openrtb.dict", 16384),
    "decode_differential": (OPENRTB, "openrtb.dict", 16384),
    "macro_substitute": (OPENRTB, None, 4096),
    "native_request": (OPENRTB, "openrtb.dict", 36864),
    "convert": (OPENRTB, "openrtb.dict", 16384),
    "repair": (OPENRTB, "openrtb.dict", 36864),
    "notice_params": (GAVEL, "notice.dict", 4096),
    "exchange_config": (GAVEL, "toml.dict", 8192),
    "bidder_config": (GAVEL, "toml.dict", 8192),
    "campaigns_json": (GAVEL, "campaigns_json.dict", 16384),
    "campaigns_toml": (GAVEL, "toml.dict", 16384),
    "consent_gpp": (GAVEL, None, 4096),
    # Past the 16 KiB TC string limit, so that the refusal of a longer string is reached.
    "consent_tcf": (GAVEL, None, 17408),
    # Auction records at fan-out 10 are about 3 KB; well past that, short of the 1 MiB limit.
    "records_line": (GAVEL, None, 16384),
}

STATUS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")
STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
CRASH = re.compile(r"ERROR: libFuzzer: (\S+)|ERROR: AddressSanitizer: (\S+)|SUMMARY: libFuzzer: (\S+)|"
                   r"panicked at")
ARTIFACT = re.compile(r"Test unit written to (\S+)")


def env():
    e = dict(os.environ, RUSTC_BOOTSTRAP="1")
    e.setdefault("RUST_BACKTRACE", "1")
    return e


def prepare(fuzz_dir, strict):
    """Seeds the corpora of one fuzz directory and builds all its targets."""
    path = os.path.join(ROOT, fuzz_dir)
    lock, root_lock = os.path.join(path, "Cargo.lock"), os.path.join(ROOT, "Cargo.lock")
    if not os.path.exists(lock) and os.path.exists(root_lock):
        # Start from the workspace's resolution: the same dependency versions as the product.
        shutil.copyfile(root_lock, lock)
    print(f"{fuzz_dir}: seeding", flush=True)
    subprocess.run(["sh", os.path.join(path, "seed_corpus.sh")], check=True, stdout=subprocess.DEVNULL)
    print(f"{fuzz_dir}: building (release, debug assertions, AddressSanitizer)", flush=True)
    cmd = ["cargo", "fuzz", "build", "--fuzz-dir", fuzz_dir]
    if strict and fuzz_dir == GAVEL:
        cmd += ["--features", "strict"]
    started = time.time()
    r = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-6000:])
        sys.exit(f"{fuzz_dir}: build failed: {' '.join(cmd)}")
    return round(time.time() - started)


def host():
    """The target triple cargo-fuzz builds for by default: the host's."""
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return next(l.split(": ", 1)[1] for l in out.splitlines() if l.startswith("host: "))


def run(name, args):
    """Runs one target for args.seconds; returns libFuzzer's figures and any crash."""
    fuzz_dir, dictionary, max_len = TARGETS[name]
    path = os.path.join(ROOT, fuzz_dir)
    corpus = os.path.join(fuzz_dir, "corpus", name)
    regressions = os.path.join(fuzz_dir, "regressions", name)
    os.makedirs(os.path.join(ROOT, corpus), exist_ok=True)
    inputs = [corpus] + ([regressions] if os.path.isdir(os.path.join(ROOT, regressions)) else [])
    flags = [f"-max_total_time={args.seconds}", f"-max_len={max_len}",
             f"-rss_limit_mb={args.rss_limit_mb}", f"-timeout={args.timeout}",
             "-print_final_stats=1"]
    if dictionary:
        flags.append(f"-dict={os.path.join(fuzz_dir, dictionary)}")
    # The binary `prepare` built, run directly: every target of one invocation runs the same
    # build, even if the sources change meanwhile (`cargo fuzz run` would rebuild first).
    binary = os.path.join(fuzz_dir, "target", host(), "release", name)
    artifacts = os.path.join(fuzz_dir, "artifacts", name)
    os.makedirs(os.path.join(ROOT, artifacts), exist_ok=True)
    cmd = [binary, f"-artifact_prefix={artifacts}/"] + flags + inputs
    logs = os.path.join(path, "target", "logs")
    os.makedirs(logs, exist_ok=True)
    log_path = os.path.join(logs, f"{name}.log")
    print(f"{name}: {args.seconds} s, -max_len={max_len}", flush=True)
    out = {"target": name, "fuzz_dir": fuzz_dir, "max_len": max_len, "seconds": args.seconds,
           "command": " ".join(cmd), "log": os.path.relpath(log_path, ROOT),
           "execs": None, "exec_per_s": None, "corpus": None, "corpus_size": None, "cov": None,
           "ft": None, "new_units": None, "peak_rss_mb": None, "crashes": 0, "crash": None,
           "artifact": None}
    started = time.time()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
        for line in p.stdout:
            log.write(line)
            line = line.rstrip("\n")
            m = STATUS.match(line)
            if m:
                out.update(execs=int(m[1]), cov=int(m[3]), ft=int(m[4]), corpus=int(m[5]),
                           corpus_size=m[6])
                if m[2] in ("INITED", "DONE", "pulse"):
                    print("    " + line, flush=True)
                continue
            m = STAT.match(line)
            if m:
                key = {"number_of_executed_units": "execs", "average_exec_per_sec": "exec_per_s",
                       "new_units_added": "new_units", "peak_rss_mb": "peak_rss_mb"}.get(m[1])
                if key:
                    out[key] = int(m[2])
                continue
            m = CRASH.search(line)
            if m:
                out["crash"] = out["crash"] or next((g for g in m.groups() if g), "panic")
                print("    " + line, flush=True)
            m = ARTIFACT.search(line)
            if m:
                out["artifact"] = os.path.relpath(os.path.join(ROOT, m[1]), ROOT)
                print("    " + line, flush=True)
        code = p.wait()
    out["wall_seconds"] = round(time.time() - started)
    if out["exec_per_s"] is None and out["execs"]:
        out["exec_per_s"] = round(out["execs"] / max(1, out["wall_seconds"]))
    if code != 0 or out["crash"]:
        out["crashes"] = 1
        out["crash"] = out["crash"] or f"exit status {code}"
        print(f"{name}: CRASH ({out['crash']}); log {out['log']}", flush=True)
        if out["artifact"]:
            strict = " --features strict" if args.strict and fuzz_dir == GAVEL else ""
            print(f"    replay: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir {fuzz_dir}{strict} {name} "
                  f"{out['artifact']}", flush=True)
    return out


def n(x):
    return "–" if x is None else f"{x:,}"


def table(results):
    rows = ["| target | s | execs | exec/s | corpus | cov | crashes |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        corpus = "–" if r["corpus"] is None else f"{r['corpus']:,} ({r['corpus_size']})"
        crashes = str(r["crashes"]) + (f" ({r['crash']})" if r["crashes"] else "")
        rows.append(f"| `{r['target']}` | {r['seconds']} | {n(r['execs'])} | {n(r['exec_per_s'])} | "
                    f"{corpus} | {n(r['cov'])} | {crashes} |")
    return "\n".join(rows)


def machine():
    model = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} vCPU {model}, {platform.system()} {platform.release()}, {rustc}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=list(TARGETS), action="append", help="run only this target (repeatable)")
    ap.add_argument("--seconds", type=int, default=30, help="fuzzing time per target (default 30)")
    ap.add_argument("--rss-limit-mb", type=int, default=2048, help="libFuzzer -rss_limit_mb (default 2048)")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    ap.add_argument("--strict", action="store_true", help="also check open findings (feature `strict`)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args()
    if subprocess.run(["cargo", "fuzz", "--version"], capture_output=True).returncode != 0:
        sys.exit("cargo-fuzz is missing: cargo install cargo-fuzz")
    names = args.only or list(TARGETS)
    started = time.time()
    builds = {}
    for fuzz_dir in dict.fromkeys(TARGETS[name][0] for name in names):
        builds[fuzz_dir] = prepare(fuzz_dir, args.strict)
    results = [run(name, args) for name in names]
    print()
    print(table(results))
    crashed = [r["target"] for r in results if r["crashes"]]
    if args.json:
        report = {"date": time.strftime("%Y-%m-%d"), "machine": machine(),
                  "command": "python3 bench/fuzz.py " + " ".join(sys.argv[1:]),
                  "seconds_per_target": args.seconds, "strict": args.strict,
                  "rss_limit_mb": args.rss_limit_mb, "timeout_s": args.timeout,
                  "build_seconds": builds, "wall_seconds": round(time.time() - started),
                  "targets": results, "crashed": crashed}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if crashed:
        sys.exit(f"crashed: {', '.join(crashed)}")


if __name__ == "__main__":
    main()
