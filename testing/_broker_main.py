"""What a forked broker runs (forkserver.py); importing it imports the whole broker."""
from __future__ import annotations

import samsa.broker.server  # noqa: F401  (the import cost the fork server pays once)
from samsa.tools.cli import main as _cli_main


def main(argv: list[str]) -> int:
    """``samsa server ...`` in this process."""
    return _cli_main(["server", *argv])
