"""What each test saw (processes and directories), for the outer test to check after
the run that none is left: one JSON line per broker in $SAMSA_SAMPLE_RECORD."""
import json
import os


def record(broker_like) -> None:
    path = os.environ.get("SAMSA_SAMPLE_RECORD")
    if not path:
        return
    procs = getattr(broker_like, "processes", None) or [broker_like.process]
    with open(path, "a") as f:
        for p in procs:
            f.write(json.dumps({"pid": p.pid, "dir": str(getattr(p, "work_dir", ""))}) + "\n")
