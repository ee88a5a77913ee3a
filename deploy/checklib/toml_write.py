"""A TOML writer for what tomllib reads back from a Gavel configuration: tables, arrays of
tables, strings, integers, floats, booleans and arrays of those. The checks merge environment
overrides into a configuration and write it for `gavel check-config`; Python has no writer."""

import json
import math


def dumps(doc: dict) -> str:
    lines: list[str] = []
    _table(doc, [], lines)
    return "\n".join(lines) + "\n"


def _key(name: str) -> str:
    bare = name and all(c.isalnum() or c in "-_" for c in name)
    return name if bare else json.dumps(name)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"no TOML for {v}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise ValueError(f"no TOML for {type(v).__name__}")


def _is_table_array(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(doc: dict, path: list[str], lines: list[str]) -> None:
    for k, v in doc.items():
        if not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in doc.items():
        sub = path + [_key(k)]
        if isinstance(v, dict):
            lines.append("")
            lines.append("[" + ".".join(sub) + "]")
            _table(v, sub, lines)
        elif _is_table_array(v):
            for item in v:
                lines.append("")
                lines.append("[[" + ".".join(sub) + "]]")
                _table(item, sub, lines)
