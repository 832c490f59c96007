"""The container image (Dockerfile): built on a Debian base from a host-made
wheelhouse, it runs samsa as a non-root user configured by KAFKA_* variables,
serves a real client over the host network, keeps its data in the volume
across containers, and shuts down cleanly on docker stop (SIGTERM)."""
from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

from .kafka_io import consume, produce

# The first test also waits for the shared set-up: dockerd, debootstrap (cached
# after the first run), pip wheel and the image build.
pytestmark = pytest.mark.timeout(900)

STARTED = re.compile(r"samsa broker \d+ started")
STOPPED_CLEANLY = "samsa broker stopped cleanly"


def _wait_for_log(dockerd, name: str, pattern: re.Pattern, timeout: float = 60.0) -> str:
    """The container's log once ``pattern`` is in it; fails early if it exits."""
    seen = [""]

    def logged() -> str | None:
        seen[0] = log = dockerd.logs(name)
        if pattern.search(log):
            return log
        if dockerd.inspect(name, "{{.State.Running}}") != "true":
            raise AssertionError(f"container {name} exited before {pattern.pattern!r}:\n{log[-3000:]}")
        return None

    return wait_until(logged, timeout, lambda: f"{pattern.pattern!r} from {name}:\n{seen[0][-3000:]}",
                      interval=0.2)


def _run_broker(dockerd, image: str, name: str, volume: str, port: int) -> None:
    dockerd.docker("run", "-d", "--name", name, "--network", "host",
                   "-e", f"KAFKA_LISTENERS=PLAINTEXT://127.0.0.1:{port}",
                   "-e", f"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:{port}",
                   "-v", f"{volume}:/var/lib/samsa", image)
    _wait_for_log(dockerd, name, STARTED)


def _stop_cleanly(dockerd, name: str) -> None:
    # docker stop sends SIGTERM and SIGKILLs only after the grace period.
    dockerd.docker("stop", "--time", "60", name, timeout=90)
    log = dockerd.logs(name)
    assert STOPPED_CLEANLY in log, f"no clean-shutdown line from {name}:\n{log[-3000:]}"
    assert dockerd.inspect(name, "{{.State.ExitCode}}") == "0"


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uid of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for pid {pid}")


def test_broker_runs_as_non_root_keeps_its_data_in_the_volume_and_stops_cleanly(
        dockerd, samsa_image):
    port = free_port()
    volume = f"samsa-data-{uuid.uuid4().hex[:8]}"
    topic = "image-test"
    values = [b"record-%d" % i for i in range(50)]

    _run_broker(dockerd, samsa_image, "samsa-first", volume, port)
    # The broker process itself, as the kernel sees it from outside the container.
    pid = int(dockerd.inspect("samsa-first", "{{.State.Pid}}"))
    assert 0 not in _uids(pid), f"broker runs with uids {_uids(pid)}"
    assert dockerd.inspect("samsa-first", "{{.Config.User}}") == "samsa"

    produce(f"127.0.0.1:{port}", topic, values)
    assert consume(f"127.0.0.1:{port}", topic, len(values), "g1") == values
    _stop_cleanly(dockerd, "samsa-first")
    dockerd.docker("rm", "samsa-first")

    # The records are files in the volume, not in the removed container...
    mountpoint = Path(dockerd.inspect(volume, "{{.Mountpoint}}"))
    assert (mountpoint / f"{topic}-0").is_dir(), sorted(p.name for p in mountpoint.iterdir())
    # ...and a new container on the same volume serves them.
    _run_broker(dockerd, samsa_image, "samsa-second", volume, port)
    assert consume(f"127.0.0.1:{port}", topic, len(values), "g2") == values
    _stop_cleanly(dockerd, "samsa-second")
    dockerd.docker("rm", "-v", "samsa-second")
    dockerd.docker("volume", "rm", volume)


def test_bad_setting_refuses_to_start_naming_the_key(dockerd, samsa_image):
    p = dockerd.docker("run", "--rm", "--network", "host", "-e", "KAFKA_NUM_PARTITIONS=many",
                       samsa_image, check=False, timeout=60)
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 2, out
    assert "num.partitions" in out and "many" in out, out
