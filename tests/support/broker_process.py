"""A samsa broker as a child process: the test kit's (samsa.testing.broker_process).

The suite starts brokers as a user does, ``python -m samsa server FILE --override ...``
in a new process (cwd: this checkout); the kit's forked start-up is for its users."""
from pathlib import Path

from samsa.testing.broker_process import BrokerProcess as _KitBrokerProcess
from samsa.testing.broker_process import broker_in_temp_dir

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


class BrokerProcess(_KitBrokerProcess):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cwd", REPO_ROOT)
        super().__init__(*args, **kwargs)


__all__ = ["REPO_ROOT", "BrokerProcess", "broker_in_temp_dir"]
