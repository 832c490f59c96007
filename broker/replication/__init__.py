"""Replication: leaders track their followers and the high watermark,
followers copy their leaders' logs (see leader.py, manager.py, fetcher.py)."""
