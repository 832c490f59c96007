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


@pytest.fixture(scope="session")
def samsa_image(dockerd, base, context) -> str:
    """The repository's Dockerfile, built on the Debian base from the wheelhouse."""
    tag = "samsa:test"
    dockerd.docker("build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}",
                   "-t", tag, str(context), timeout=600)
    return tag
