"""`python -m samsa ...` is the `samsa` command (tools/cli.py)."""
import sys

from samsa.tools.cli import main

sys.exit(main())
