"""A broker's Prometheus page (``metrics.port``), read as a test reads it."""
from __future__ import annotations

import re
import urllib.request


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, labels: str = "") -> float | None:
    """The value of the sample ``name{labels}`` in a scraped page (None: not there)."""
    m = re.search(rf"^{re.escape(name + labels)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None
