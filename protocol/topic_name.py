"""Kafka's rule for topic names, in one place for every layer that meets one
(requests, the topic service, partition directories found on disk).

Legal: 1 to 249 characters from ASCII letters, digits, '.', '_' and '-',
and not "." or "..". The whole name must match: a pattern anchored with
``$`` would let a final newline through (``"abc\\n"``), which then becomes a
directory name and a log line split in two.
"""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "Topic name is empty"
    if name in (".", ".."):
        return f"Topic name cannot be '{name}'"
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is longer than {MAX_NAME_LENGTH} characters"
    if _LEGAL.fullmatch(name) is None:
        return (f"Topic name {name!r} is illegal: it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def collision_key(name: str) -> str:
    """Names that differ only by '.' versus '_' collide (Kafka's metric names
    replace one by the other), so Kafka refuses the second one."""
    return name.replace(".", "_")
