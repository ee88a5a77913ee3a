"""deploy/compose/compose.yaml: `docker compose config` (the Compose specification's own
validation, no daemon needed) when a compose binary is here; then the structure: every
service has an image, Gavel's services a command Gavel knows and a health check, published
ports bound to loopback, dependencies and volumes that exist, a stop grace above the drain;
each Gavel configuration checked by `gavel check-config` with the service's environment."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from . import drain, gavel_config

GAVEL_IMAGE = re.compile(r"^gavel(:|$)")


def compose_binary(venv_bin: Path | None) -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    for candidate in ([venv_bin / "docker-compose"] if venv_bin else []) + [Path(p) for p in [shutil.which("docker-compose") or ""] if p]:
        if candidate.is_file():
            return [str(candidate)]
    return None


def interpolation_names(text: str) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))


def check(root: Path, gavel: Path, venv_bin: Path | None, work: Path, report) -> None:
    compose_dir = root / "deploy" / "compose"
    path = compose_dir / "compose.yaml"
    where = "compose.yaml"
    try:
        text = path.read_text()
        doc = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as e:
        report.problem(where, f"unreadable: {e}")
        return
    # Dummies for what .env (make-secrets.sh) would hold: the file must name each one.
    dummies = {name: gavel_config.dummy_secret(name) for name in interpolation_names(text)}
    make_secrets = (compose_dir / "make-secrets.sh").read_text() if (compose_dir / "make-secrets.sh").is_file() else ""
    for name in sorted(dummies):
        if f"{name}=" not in make_secrets:
            report.problem(where, f"${{{name}}} is not written by make-secrets.sh")
    binary = compose_binary(venv_bin)
    if binary is None:
        report.note("compose: no `docker compose` or docker-compose here; the Compose specification check did not run")
    else:
        env = dict(os.environ, **dummies)
        result = subprocess.run(binary + ["-f", str(path), "config", "-q"], env=env, capture_output=True, text=True, cwd=compose_dir)
        if result.returncode != 0:
            report.problem(where, "docker compose config refused it: " + (result.stderr.strip() or result.stdout.strip()))
        else:
            report.passed()
    resolved = _resolve(doc, dummies)
    services = resolved.get("services") or {}
    volumes = set((resolved.get("volumes") or {}).keys())
    for name, svc in services.items():
        check_service(compose_dir, name, svc, services, volumes, gavel, work / name, report)
    check_prometheus(root, compose_dir, work / "prometheus", report)


def _resolve(doc, dummies):
    """The document with ${NAME...} replaced by its dummy (YAML merge keys are already merged)."""
    if isinstance(doc, dict):
        return {k: _resolve(v, dummies) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_resolve(v, dummies) for v in doc]
    if isinstance(doc, str):
        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}", lambda m: dummies.get(m.group(1), ""), doc)
    return doc


def _env(svc) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: str(v) for k, v in env.items()}


def _command(svc) -> list[str]:
    cmd = svc.get("command") or []
    if isinstance(cmd, str):
        cmd = cmd.split()
    if svc.get("entrypoint") and cmd:
        # `sh -c "... exec gavel exchange --config X ..."`: the gavel command inside.
        joined = " ".join(cmd)
        m = re.search(r"gavel\s+(.*)$", joined)
        return m.group(1).split() if m else []
    return list(cmd)


def check_service(compose_dir, name, svc, services, volumes, gavel, work, report) -> None:
    where = f"compose.yaml service {name}"
    if not svc.get("image") and not svc.get("build"):
        report.problem(where, "neither image nor build")
    for dep in svc.get("depends_on") or []:
        if dep not in services:
            report.problem(where, f"depends on {dep}, which is no service")
    mode = svc.get("network_mode", "")
    if mode.startswith("service:") and mode[len("service:"):] not in services:
        report.problem(where, f"network_mode names {mode}, which is no service")
    for port in svc.get("ports") or []:
        if not str(port).startswith("127.0.0.1:"):
            report.problem(where, f"publishes {port} on every interface; bind 127.0.0.1 (put a proxy in front to open it)")
    mounts = {}
    for v in svc.get("volumes") or []:
        parts = str(v).split(":")
        source, target = parts[0], parts[1] if len(parts) > 1 else ""
        if source.startswith((".", "/")):
            host = (compose_dir / source).resolve()
            if not host.exists():
                report.problem(where, f"mounts {source}, which does not exist")
            mounts[target] = host
        elif source not in volumes:
            report.problem(where, f"mounts volume {source}, not declared under volumes")
    health = svc.get("healthcheck") or {}
    gavel_service = bool(GAVEL_IMAGE.match(str(svc.get("image", ""))))
    env = _env(svc)
    if not gavel_service:
        if not health.get("test") and not health.get("disable"):
            report.problem(where, "no healthcheck")
        report.passed()
        return
    args = _command(svc)
    server = next((a for a in args if a in gavel_config.SERVERS + ("sim", "ledger")), None)
    if server is None:
        report.problem(where, f"command {args} runs no Gavel server")
        return
    if not health.get("disable") and server in gavel_config.SERVERS and "GAVEL_HEALTH_PORT" not in env:
        report.problem(where, "the image's healthcheck needs GAVEL_HEALTH_PORT (its public port)")
    grace = drain.parse_duration_s(svc.get("stop_grace_period", "10s"))
    if server in gavel_config.SERVERS and (grace is None or grace <= drain.needed_seconds(None)):
        report.problem(where, f"stop_grace_period {svc.get('stop_grace_period', '10s (default)')} does not exceed the drain and flush ({drain.needed_seconds(None):g} s)")
    if server not in gavel_config.SERVERS and server != "ledger":
        report.passed()
        return
    kind = "bidder" if server == "ledger" else server
    config = args[args.index("--config") + 1] if "--config" in args else None
    if config is None:
        report.problem(where, "no --config")
        return
    prefix = ""
    if config.startswith("/tmp/") and server == "exchange":
        # Compose's exchange runs on gavel sim's file followed by its own (compose.yaml).
        config = "/etc/gavel/exchange.toml"
        prefix = sim_file(gavel, work, report)
    host = mounts.get(config)
    if host is None:
        report.problem(where, f"reads {config}, which no volume provides")
        return
    config_dir = Path(config).parent
    files = {Path(t).name: h.read_text() for t, h in mounts.items() if Path(t).parent == config_dir and h.is_file()}
    if health.get("disable") is not True and server in gavel_config.SERVERS:
        port = env.get("GAVEL_HEALTH_PORT", "")
        if f":{port}" not in files.get(Path(config).name, "") + " ".join(args):
            report.problem(where, f"GAVEL_HEALTH_PORT {port} is not the port the server listens on")
    gavel_config.check(
        gavel=gavel, kind=kind, config_name=Path(config).name, files=files, secret_files={}, env=env,
        local_names=set(services), work=work, where=where, report=report, prefix_text=prefix,
    )


_SIM_CACHE: dict[str, str] = {}


def sim_file(gavel: Path, work: Path, report) -> str:
    """What `gavel sim --write-bidders` writes, from the binary itself (run for a moment)."""
    if "text" in _SIM_CACHE:
        return _SIM_CACHE["text"]
    work.mkdir(parents=True, exist_ok=True)
    out = work / "sim-bidders.toml"
    result = subprocess.run(
        [str(gavel), "--threads", "1", "--log", "error", "sim", "--bidders", "3", "--write-bidders", str(out), "--duration", "1s"],
        capture_output=True, text=True, timeout=60,
    )
    if result.returncode != 0 or not out.is_file():
        report.problem("compose.yaml service sim", "gavel sim did not write its bidders' file: " + result.stderr.strip())
        return ""
    _SIM_CACHE["text"] = out.read_text() + "\n"
    return _SIM_CACHE["text"]


def check_prometheus(root: Path, compose_dir: Path, work: Path, report) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        report.note("compose: no promtool here; prometheus.yml was not checked")
        return
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(compose_dir / "prometheus.yml", work / "prometheus.yml")
    shutil.copy(root / "deploy" / "prometheus" / "alerts.yml", work / "alerts.yml")
    result = subprocess.run([promtool, "check", "config", str(work / "prometheus.yml")], capture_output=True, text=True)
    if result.returncode != 0:
        report.problem("compose/prometheus.yml", "promtool refused it: " + (result.stderr.strip() or result.stdout.strip()))
    else:
        report.passed()
