"""The offset-reset flags kafka-consumer-groups and kafka-share-groups share:
which partitions (``--topic T[:P,P]`` / ``--all-topics``), where to
(``--to-earliest`` ... ``--to-datetime``) and whether to write
(``--dry-run`` / ``--execute``), parsed alike for both tools."""
from __future__ import annotations

import argparse
from datetime import datetime


def topic_spec(text: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:0,1``."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P, got {text!r}")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC:0,1,..., got {text!r}") from None


def datetime_ms(text: str) -> int:
    """YYYY-MM-DDTHH:mm:SS.sss with an optional zone (Z, +01:00); local time without."""
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date like 2024-01-31T12:00:00.000 (optionally with Z or +hh:mm), "
            f"got {text!r}") from None


def add_reset_arguments(p: argparse.ArgumentParser, *, shift_by: bool) -> None:
    """The scope, target and run flags of ``--reset-offsets`` (kafka-share-groups
    has no ``--shift-by``)."""
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", type=topic_spec, metavar="TOPIC[:P,P]")
    scope.add_argument("--all-topics", action="store_true")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    if shift_by:
        to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument("--to-datetime", type=datetime_ms, metavar="YYYY-MM-DDTHH:mm:SS.sss")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--execute", action="store_true")
