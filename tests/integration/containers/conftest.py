"""One dockerd, one base image and one samsa image for all container tests
(building them is most of these tests' time)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.docker import Dockerd, base_image, build_context, require_container_tools


@pytest.fixture(scope="session")
def dockerd():
    require_container_tools()
    d = Dockerd().start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def base(dockerd) -> str:
    """A Debian image with python3, in place of python:3.11-slim (no registry)."""
    return base_image(dockerd)


@pytest.fixture(scope="session")
def context():
    """A copy of the repository's image inputs with a wheelhouse."""
    where = Path(tempfile.mkdtemp(prefix="samsa-context-"))
    try:
        yield build_context(where / "samsa")
    finally:
        shutil.rmtree(where, ignore_errors=True)


# docker-compose.yml on the host network (no bridge here): the compose tests' files too.
HOST_NETWORK = "deploy/compose.host-network.yml"


@pytest.fixture(scope="session")
def samsa_image(dockerd, base, context) -> str:
    """The repository's Dockerfile, built on the Debian base from the wheelhouse, through
    docker-compose.yml's build section (context ., BASE_IMAGE): test_compose builds its
    brokers the same way, and that second build is then all cache hits. (A `docker build`
    here would not be: the docker client and docker-compose tar the context differently,
    so every COPY missed the cache and samsa was built twice, about a minute each.)"""
    tag = "samsa:test"
    dockerd.compose("-p", "samsaimage", "-f", "docker-compose.yml", "-f", HOST_NETWORK,
                    "build", "samsa-0", cwd=context,
                    env={"SAMSA_TAG": tag.split(":")[1], "SAMSA_BASE_IMAGE": base}, timeout=600)
    return tag
