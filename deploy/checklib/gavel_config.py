"""A Gavel configuration as a deployment file carries it, checked by Gavel itself: environment
overrides merged in, in-cluster host names pointed at loopback, secrets replaced by dummies,
then `gavel check-config`, which refuses an unknown key or a bad value naming it.

What a deployment may put in a container's environment:
- the variables Gavel reads by name (PLAIN_VARIABLES, and any the configuration names in a
  `key_env` or `price_key_env`);
- a configuration key, `GAVEL_<SERVER>__<KEY>__<KEY>` (SERVER = EXCHANGE, BIDDER or EDGE, the
  container's own); it is merged into the file here, so a key that does not exist is refused
  by check-config exactly as in the file.
Anything else named GAVEL_* is a problem: a typo Gavel would ignore."""

import os
import re
import secrets
import subprocess
import tomllib
from pathlib import Path

from . import toml_write

SERVERS = ("exchange", "bidder", "edge")
# Where every deployment here mounts the server's writable volume (the image's WORKDIR).
STATE_DIR = "/var/lib/gavel"

# Read by name by the binary (docs/security.md, docs/operations.md) or by the image
# (GAVEL_HEALTH_PORT, the Dockerfile's HEALTHCHECK).
PLAIN_VARIABLES = {
    "GAVEL_LOG",
    "GAVEL_LOG_FORMAT",
    "GAVEL_ADMIN_TOKEN",
    "GAVEL_NOTICE_KEY",
    "GAVEL_PREVIOUS_NOTICE_KEY",
    "GAVEL_PRICE_KEYS",
    "GAVEL_REDIS_URL",
    "GAVEL_HEALTH_PORT",
}

# A dummy for each secret variable, shaped as Gavel wants it.
def dummy_secret(name: str) -> str:
    if name == "GAVEL_REDIS_URL":
        return "redis://:dummy-password@127.0.0.1:6379"
    return secrets.token_hex(32)


def env_names_in_config(doc) -> set[str]:
    """Every variable a configuration names in a `*_env` key (seller keys, price keys,
    writer keys...), wherever it sits."""
    found: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k.endswith("_env") and isinstance(v, str):
                found.add(v)
            else:
                found |= env_names_in_config(v)
    elif isinstance(doc, list):
        for x in doc:
            found |= env_names_in_config(x)
    return found


def override_path(name: str, server: str):
    """`GAVEL_BIDDER__LEDGER__REDIS_MODE` -> ["ledger", "redis_mode"] for server "bidder";
    None when the name is not an override of that server's configuration."""
    prefix = f"GAVEL_{server.upper()}__"
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix):].split("__")
    if not parts or any(not re.fullmatch(r"[A-Z0-9_]+", p) for p in parts):
        return None
    return [p.lower() for p in parts]


def override_value(text: str):
    """An override's value as TOML would read it (numbers, booleans, arrays), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def merge(doc: dict, path: list[str], value) -> None:
    node = doc
    for key in path[:-1]:
        nxt = node.setdefault(key, {})
        if not isinstance(nxt, dict):
            nxt = {}
            node[key] = nxt
        node = nxt
    node[path[-1]] = value


URL_HOST = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<auth>[^@/\s\"']*@)?(?P<host>[A-Za-z0-9.-]+)")


def point_hosts_home(text: str, local_names: set[str], where: str, report) -> str:
    """Hosts of URLs: a name of this deployment (a Service, a compose service) or a cluster
    name (`*.svc`, `*.svc.cluster.local`) becomes 127.0.0.1, since Gavel resolves some of them
    when it loads (the cache URL). A bare name that is neither is reported: it resolves
    nowhere the deployment runs."""

    def swap(m: re.Match) -> str:
        host = m.group("host")
        first = host.split(".")[0]
        in_cluster = host.endswith(".svc") or host.endswith(".svc.cluster.local")
        if first in local_names and (host == first or in_cluster):
            host = "127.0.0.1"
        elif in_cluster:
            host = "127.0.0.1"
        elif "." not in host and host not in ("localhost",):
            report.problem(where, f"URL host {host!r} names nothing this deployment defines")
        return m.group("scheme") + (m.group("auth") or "") + host

    return URL_HOST.sub(swap, text)


def check(
    *,
    gavel: Path,
    kind: str,
    config_name: str,
    files: dict[str, str],
    secret_files: dict[str, str],
    env: dict[str, str],
    local_names: set[str],
    work: Path,
    where: str,
    report,
    prefix_text: str = "",
) -> None:
    """Lays the configuration out as the server would see it (`work/config/<files>`,
    `work/secrets/<secret files>`), merges `env`'s overrides, checks names, runs
    `gavel check-config --kind <kind>`. `prefix_text` goes before the file (compose's
    exchange runs on gavel sim's file followed by its own)."""
    config_dir = work / "config"
    secrets_dir = work / "secrets"
    config_dir.mkdir(parents=True, exist_ok=True)
    secrets_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if name != config_name:  # the configuration itself is written once merged, below
            (config_dir / name).write_text(point_hosts_home(text, local_names, f"{where} {name}", report))
    for name, text in secret_files.items():
        path = secrets_dir / name
        path.write_text(text)
        path.chmod(0o600)
    if config_name not in files:
        report.problem(where, f"the command reads {config_name}, which the deployment does not provide")
        return
    text = prefix_text + files[config_name]
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        report.problem(f"{where} {config_name}", f"not TOML: {e}")
        return
    named_env = env_names_in_config(doc)
    merged_names = []
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GAVEL_LOG": "error"}
    for name, value in env.items():
        if not name.startswith("GAVEL_") and name not in named_env:
            continue
        path = override_path(name, kind)
        if path is not None:
            merge(doc, path, override_value(value))
            merged_names.append(name)
        elif name in PLAIN_VARIABLES or name in named_env:
            run_env[name] = value
        elif any(override_path(name, s) for s in SERVERS):
            report.problem(where, f"{name} overrides another server's configuration, not {kind}'s")
        else:
            report.problem(where, f"{name} is no variable Gavel reads")
    for name in named_env:
        if name not in env:
            report.problem(where, f"{config_name} reads {name}, which the environment does not set")
            run_env[name] = dummy_secret(name)
    merged = point_hosts_home(toml_write.dumps(doc), local_names, f"{where} {config_name}", report)
    # The state volume, as the server finds it: an empty directory at STATE_DIR. A path under
    # it that Gavel needs to exist and does not make (ledger.state_dir) shows as a warning.
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    merged = merged.replace(f'"{STATE_DIR}', f'"{state}')
    (config_dir / config_name).write_text(merged)
    result = subprocess.run(
        [str(gavel), "check-config", "--kind", kind, str(config_dir / config_name)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("warning:") and "not writable" in line:
            report.problem(f"{where} {config_name}", "on an empty state volume: " + line.replace(str(state), STATE_DIR))
    if result.returncode != 0:
        # Gavel's refusal names the key; its TOML excerpt spans lines: keep them on one.
        why = " | ".join(l.strip() for l in (result.stderr or result.stdout).splitlines() if l.strip().strip("|"))
        merged = f" (with {', '.join(merged_names)} merged in)" if merged_names else ""
        report.problem(f"{where} {config_name}", f"gavel check-config refused it{merged}: {why[:600] or f'exit {result.returncode}'}")
    else:
        report.passed()
