"""kafka-configs' --add-config and --delete-config lists, read the same for every entity
type (topics and brokers here in __init__.py, users/clients/ips in quotas.py)."""
from __future__ import annotations

import sys


def parse_config_list(text: str) -> dict[str, str]:
    """kafka-configs' ``k1=v1,k2=[a,b]`` (brackets keep commas inside a value)."""
    out: dict[str, str] = {}
    depth = 0
    item = ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if item.strip():
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ValueError(f"expected key=value, got {item.strip()!r}")
                value = value.strip()
                if value.startswith("[") and value.endswith("]"):
                    value = value[1:-1]
                out[key.strip()] = value
            item = ""
        else:
            item += ch
    if depth != 0:
        raise ValueError(f"unbalanced brackets in {text!r}")
    return out



def alter_lists(add_config: str | None,
                delete_config: str | None) -> tuple[dict[str, str], list[str]] | None:
    """--add-config and --delete-config as (keys to set, keys to delete); None
    (after a one-line error) when they are malformed or both empty."""
    try:
        adds = parse_config_list(add_config or "")
    except ValueError as e:
        print(f"samsa configs: --add-config: {e}", file=sys.stderr)
        return None
    deletes = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    if not adds and not deletes:
        print("samsa configs: --alter needs --add-config or --delete-config", file=sys.stderr)
        return None
    return adds, deletes
