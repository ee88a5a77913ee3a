"""How long a Gavel server may take to stop after SIGTERM, from its configuration: the drain
(`[http] drain_grace_ms`, accepting while load balancers let go; `drain_timeout_ms`, work in
flight finishing) plus the flush after it (queued notices get up to 5 s, records and leases
go out). A supervisor's kill timeout (terminationGracePeriodSeconds, TimeoutStopSec,
stop_grace_period) must be longer, or SIGKILL cuts the drain short."""

DEFAULT_GRACE_MS = 5000
DEFAULT_TIMEOUT_MS = 10000
FLUSH_MS = 5000


def needed_seconds(config: dict | None) -> float:
    http = (config or {}).get("http", {})
    grace = http.get("drain_grace_ms", DEFAULT_GRACE_MS)
    timeout = http.get("drain_timeout_ms", DEFAULT_TIMEOUT_MS)
    if not isinstance(grace, int) or not isinstance(timeout, int):
        grace, timeout = DEFAULT_GRACE_MS, DEFAULT_TIMEOUT_MS
    return (grace + timeout + FLUSH_MS) / 1000.0


def parse_duration_s(text: str) -> float | None:
    """`30s`, `1min 30s`, `90`, `2m` (systemd's and compose's spellings) in seconds."""
    import re

    text = str(text).strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
        return float(text)
    units = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    total = 0.0
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)", text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != re.sub(r"\s+", "", text):
        return None
    for number, unit in parts:
        if unit not in units:
            return None
        total += float(number) * units[unit]
    return total
