"""Kubernetes resource quantities (`500m`, `2`, `384Mi`, `1G`) as numbers, to compare a
request with its limit and a CPU limit with `--threads`."""

import re

_SUFFIX = {
    "": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}


def parse(q) -> float | None:
    """The quantity's value, or None when it is not one."""
    if isinstance(q, (int, float)) and not isinstance(q, bool):
        return float(q)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)", str(q))
    if not m or m.group(2) not in _SUFFIX:
        return None
    return float(m.group(1)) * _SUFFIX[m.group(2)]
