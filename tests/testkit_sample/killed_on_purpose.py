"""Run by name only: a test that holds a cluster and a broker until its pytest is
killed (SIGKILL), to show that nothing of them outlives it."""
import json
import os
import threading

from record import record


def test_holds_its_brokers_until_killed(samsa_cluster, samsa_broker):
    record(samsa_cluster)
    record(samsa_broker)
    from samsa.testing import forkserver
    with open(os.environ["SAMSA_SAMPLE_RECORD"], "a") as f:
        for extra in ({"pid": forkserver._the_server().proc.pid, "dir": ""},
                      {"pid": 0, "dir": str(samsa_cluster._root)},
                      {"pid": 0, "dir": str(samsa_broker.work_dir)}):
            f.write(json.dumps(extra) + "\n")
    with open(os.environ["SAMSA_SAMPLE_RECORD"] + ".ready", "w"):
        pass
    threading.Event().wait()  # until killed
