"""deploy/k8s: every manifest against the Kubernetes JSON schemas of each supported version
(strict: an unknown field is an error), offline, through the `kubernetes-validate` package;
then what a schema cannot see: the kustomization lists every manifest, probes (/readyz for
readiness, /healthz for liveness), the security context, resources, the grace period against
the drain, a disruption budget and an autoscaler per Deployment, public Services that keep
the admin port out, every ConfigMap and Secret a pod names, and each server's configuration
checked by `gavel check-config` as the pod would see it."""

import tomllib
from pathlib import Path

import yaml

from . import drain, gavel_config, quantity

# Not applied by `kubectl apply -k`: checked, but outside the kustomization on purpose.
OUTSIDE_KUSTOMIZATION = {"secrets.example.yaml", "ledger-create.yaml"}
CONFIG_DIR = "/etc/gavel/config"
SECRETS_DIR = "/etc/gavel/secrets"
# What the pod's name gives a fieldRef in the check.
POD_NAME_SAMPLE = "gavel-server-7d9f8c6b5-x2x9k"


def load(k8s_dir: Path, report) -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(k8s_dir.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        try:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is None:
                    continue
                if not isinstance(doc, dict) or "kind" not in doc:
                    report.problem(path.name, "a YAML document that is no Kubernetes object")
                    continue
                docs.append((path.name, doc))
        except yaml.YAMLError as e:
            report.problem(path.name, f"not YAML: {e}")
    return docs


def check_kustomization(k8s_dir: Path, report) -> None:
    path = k8s_dir / "kustomization.yaml"
    try:
        kust = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        report.problem("kustomization.yaml", f"unreadable: {e}")
        return
    listed = kust.get("resources") or []
    for name in listed:
        if not (k8s_dir / name).is_file():
            report.problem("kustomization.yaml", f"lists {name}, which does not exist")
    present = {p.name for p in k8s_dir.glob("*.yaml")} - {"kustomization.yaml"} - OUTSIDE_KUSTOMIZATION
    for name in sorted(present - set(listed)):
        report.problem("kustomization.yaml", f"does not list {name}: `kubectl apply -k` would leave it out")
    report.passed()


def check_schemas(docs, versions: list[str], report) -> None:
    import kubernetes_validate

    for version in versions:
        for file, doc in docs:
            where = f"{file} {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            try:
                kubernetes_validate.validate(doc, version, strict=True)
                report.passed()
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                report.problem(where, f"Kubernetes {version} schema: {path}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError:
                report.problem(where, f"Kubernetes {version} has no schema for {doc.get('apiVersion')} {doc.get('kind')}")
            except kubernetes_validate.VersionNotSupportedError:
                report.problem(where, f"kubernetes-validate has no schemas for Kubernetes {version}")


def _by_kind(docs, kind: str) -> list[tuple[str, dict]]:
    return [(f, d) for f, d in docs if d.get("kind") == kind]


def _name(doc) -> str:
    return doc.get("metadata", {}).get("name", "?")


def _selects(selector: dict | None, labels: dict) -> bool:
    match = (selector or {}).get("matchLabels", selector or {})
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def check(root: Path, gavel: Path, versions: list[str], work: Path, report) -> None:
    k8s_dir = root / "deploy" / "k8s"
    docs = load(k8s_dir, report)
    check_kustomization(k8s_dir, report)
    check_schemas(docs, versions, report)
    configmaps = {_name(d): d for _, d in _by_kind(docs, "ConfigMap")}
    secrets = {_name(d): d for _, d in _by_kind(docs, "Secret")}
    services = _by_kind(docs, "Service")
    local_names = {_name(d) for _, d in services}
    for file, deploy in _by_kind(docs, "Deployment"):
        where = f"{file} Deployment/{_name(deploy)}"
        pod = deploy.get("spec", {}).get("template", {})
        labels = pod.get("metadata", {}).get("labels", {})
        if not _selects(deploy.get("spec", {}).get("selector"), labels):
            report.problem(where, "its selector does not match its pods' labels")
        check_pod(where, pod.get("spec", {}), configmaps, secrets, local_names, gavel, work / _name(deploy), report, long_running=True)
        check_companions(where, deploy, labels, docs, services, report)
    for file, job in _by_kind(docs, "Job"):
        where = f"{file} Job/{_name(job)}"
        pod = job.get("spec", {}).get("template", {})
        check_pod(where, pod.get("spec", {}), configmaps, secrets, local_names, gavel, work / _name(job), report, long_running=False)


def check_companions(where, deploy, labels, docs, services, report) -> None:
    """A PodDisruptionBudget and a CPU HorizontalPodAutoscaler for the Deployment; its
    Services pointing at ports its pods have, the public ones without the admin port."""
    name = _name(deploy)
    if not any(_selects(d.get("spec", {}).get("selector"), labels) for _, d in _by_kind(docs, "PodDisruptionBudget")):
        report.problem(where, "no PodDisruptionBudget selects its pods")
    hpas = [d for _, d in _by_kind(docs, "HorizontalPodAutoscaler") if d.get("spec", {}).get("scaleTargetRef", {}).get("name") == name]
    if not hpas:
        report.problem(where, "no HorizontalPodAutoscaler scales it")
    for hpa in hpas:
        metrics = hpa.get("spec", {}).get("metrics", [])
        if not any(m.get("resource", {}).get("name") == "cpu" for m in metrics):
            report.problem(where, "its HorizontalPodAutoscaler does not scale on CPU")
    ports = {}
    for c in deploy["spec"]["template"]["spec"].get("containers", []):
        for p in c.get("ports", []):
            ports[p.get("name")] = p.get("containerPort")
            ports[p.get("containerPort")] = p.get("containerPort")
    admin_port = ports.get("admin")
    for _, svc in services:
        if not _selects(svc.get("spec", {}).get("selector"), labels):
            continue
        svc_where = f"Service/{_name(svc)}"
        for p in svc.get("spec", {}).get("ports", []):
            target = p.get("targetPort", p.get("port"))
            if target not in ports:
                report.problem(svc_where, f"targetPort {target!r} is no port of {name}'s pods")
            elif ports[target] == admin_port and not _name(svc).endswith("-admin"):
                report.problem(svc_where, f"exposes the admin port ({admin_port}: /metrics, /admin/*); only a *-admin Service may")
    report.passed()


def check_pod(where, spec, configmaps, secrets, local_names, gavel, work, report, long_running) -> None:
    sc = spec.get("securityContext", {})
    if sc.get("runAsNonRoot") is not True:
        report.problem(where, "securityContext.runAsNonRoot is not true")
    if sc.get("runAsUser") == 0:
        report.problem(where, "runs as root (runAsUser 0)")
    volumes = {v.get("name"): v for v in spec.get("volumes", [])}
    for v in volumes.values():
        if "configMap" in v and v["configMap"].get("name") not in configmaps:
            report.problem(where, f"volume {v['name']} names ConfigMap {v['configMap'].get('name')}, defined nowhere")
        if "secret" in v:
            secret = secrets.get(v["secret"].get("secretName"))
            if secret is None:
                report.problem(where, f"volume {v['name']} names Secret {v['secret'].get('secretName')}, not in secrets.example.yaml")
            else:
                keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
                for item in v["secret"].get("items", []):
                    if item.get("key") not in keys:
                        report.problem(where, f"volume {v['name']} takes key {item.get('key')} that Secret {_name(secret)} lacks")
    for c in spec.get("containers", []):
        cwhere = f"{where} container {c.get('name')}"
        check_container(cwhere, c, report, long_running)
        check_container_config(cwhere, spec, c, volumes, configmaps, secrets, local_names, gavel, work / c.get("name", "c"), report)


def check_container(where, c, report, long_running) -> None:
    csc = c.get("securityContext", {})
    if csc.get("allowPrivilegeEscalation") is not False:
        report.problem(where, "allowPrivilegeEscalation is not false")
    if csc.get("readOnlyRootFilesystem") is not True:
        report.problem(where, "readOnlyRootFilesystem is not true")
    if "ALL" not in csc.get("capabilities", {}).get("drop", []):
        report.problem(where, "does not drop ALL capabilities")
    res = c.get("resources", {})
    for kind in ("cpu", "memory"):
        req = quantity.parse(res.get("requests", {}).get(kind))
        lim = quantity.parse(res.get("limits", {}).get(kind))
        if req is None or lim is None:
            report.problem(where, f"resources: {kind} request and limit both needed")
        elif req > lim:
            report.problem(where, f"resources: {kind} request above its limit")
    if long_running:
        ready = c.get("readinessProbe", {}).get("httpGet", {}).get("path")
        live = c.get("livenessProbe", {}).get("httpGet", {}).get("path")
        if ready != "/readyz":
            report.problem(where, f"readinessProbe must GET /readyz (false while loading and draining), not {ready!r}")
        if live != "/healthz":
            report.problem(where, f"livenessProbe must GET /healthz, not {live!r}")
        args = c.get("args", [])
        if "--threads" in args:
            i = args.index("--threads")
            threads = quantity.parse(args[i + 1]) if i + 1 < len(args) else None
            cpu = quantity.parse(res.get("limits", {}).get("cpu"))
            if threads is not None and cpu is not None and threads > max(cpu, 1):
                report.problem(where, f"--threads {args[i + 1]} exceeds its CPU limit {res['limits']['cpu']}")
    report.passed()


def _server_and_config(args: list) -> tuple[str | None, str | None]:
    """The subcommand (exchange, bidder, edge; `ledger` reads a bidder's file) and --config."""
    server = None
    for a in args:
        if a in gavel_config.SERVERS:
            server = a
            break
        if a == "ledger":
            server = "bidder"
            break
    config = args[args.index("--config") + 1] if "--config" in args and args.index("--config") + 1 < len(args) else None
    return server, config


def check_container_config(where, spec, c, volumes, configmaps, secrets, local_names, gavel, work, report) -> None:
    server, config_path = _server_and_config(c.get("args", []))
    if server is None:
        return
    if config_path is None or not config_path.startswith(CONFIG_DIR + "/"):
        report.problem(where, f"gavel {server} should read its file from {CONFIG_DIR}/")
        return
    files: dict[str, str] = {}
    secret_files: dict[str, str] = {}
    example_values: dict[str, dict] = {}
    for m in c.get("volumeMounts", []):
        v = volumes.get(m.get("name"), {})
        if m.get("mountPath") == CONFIG_DIR and "configMap" in v:
            files.update(configmaps.get(v["configMap"].get("name"), {}).get("data", {}))
        if m.get("mountPath") == SECRETS_DIR and "secret" in v:
            secret = secrets.get(v["secret"].get("secretName"), {})
            data = secret.get("stringData", {})
            items = v["secret"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                secret_files[item.get("path")] = gavel_config.dummy_secret(item.get("key")) + "\n"
    for s in secrets.values():
        example_values[_name(s)] = s.get("stringData", {})
    env = {}
    for e in c.get("env", []):
        name = e.get("name", "")
        if "value" in e:
            env[name] = str(e["value"])
        elif "fieldRef" in e.get("valueFrom", {}):
            env[name] = POD_NAME_SAMPLE
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            values = example_values.get(ref.get("name"))
            if values is None or ref.get("key") not in values:
                report.problem(where, f"env {name} takes key {ref.get('key')} of Secret {ref.get('name')}, which secrets.example.yaml lacks")
                continue
            env[name] = gavel_config.dummy_secret(name)
    config_name = config_path[len(CONFIG_DIR) + 1:]
    if server != "bidder" or "ledger" not in c.get("args", []):
        try:
            needed = drain.needed_seconds(tomllib.loads(files.get(config_name, "")))
        except tomllib.TOMLDecodeError:
            needed = drain.needed_seconds(None)
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if grace <= needed:
            report.problem(where, f"terminationGracePeriodSeconds {grace} does not exceed the drain and flush ({needed:g} s): SIGKILL would cut it short")
    gavel_config.check(
        gavel=gavel, kind=server, config_name=config_name, files=files, secret_files=secret_files,
        env=env, local_names=local_names, work=work, where=where, report=report,
    )
