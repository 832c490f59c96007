"""Entry point of ``python -m bench`` (run from the repository root); see bench/runner.py."""

import sys
from pathlib import Path

# The scenarios start brokers through tests/support, so the repo root must be importable
# even when ``python -m bench`` is run with another working directory on PYTHONPATH.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from bench.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
