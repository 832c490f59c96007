"""Fixtures as aiokafka's tests/conftest.py has them: Kafka comes from a Docker
image given by --docker-image, and every integration test skips without one."""
import asyncio
import pathlib

import pytest


def pytest_addoption(parser):
    parser.addoption("--docker-image", action="store", default=None, help="Kafka image")
    parser.addoption("--no-pull", action="store_true", help="do not pull the image")


@pytest.fixture(scope="session")
def docker(request):
    if not request.config.getoption("--docker-image"):
        return None
    import docker as docker_sdk  # not installed here: only the recipe can get past this
    return docker_sdk.from_env()


@pytest.fixture(scope="session")
def ssl_folder(tmp_path_factory):
    return pathlib.Path(tmp_path_factory.mktemp("ssl_cert"))


@pytest.fixture(scope="session")
def kafka_server(request, docker, ssl_folder):
    image = request.config.getoption("--docker-image")
    if not image:
        pytest.skip("Skipping functional test as `--docker-image` not provided")
    if not request.config.getoption("--no-pull"):
        docker.images.pull(image)
    container = docker.containers.run(image=image, detach=True)
    yield "127.0.0.1", 9092, 9093, 9094, 9095, container
    container.remove(force=True)


@pytest.fixture(scope="class")
def acl_manager(kafka_server, request):
    from ._testutil import ACLs
    return ACLs(kafka_server[-1], request.config.getoption("--docker-image").split(":")[-1])


@pytest.fixture(autouse=True)
def clean_acl(acl_manager):
    yield
    acl_manager.cleanup()


@pytest.fixture(scope="class")
def kerberos_utils(kafka_server):
    import subprocess
    subprocess.run(["ktutil"], check=True)  # needs the image's KDC


@pytest.fixture(scope="class")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="class")
def setup_test_class(request, loop, kafka_server, ssl_folder, acl_manager, kerberos_utils):
    cls = request.cls
    cls.loop = loop
    (cls.kafka_host, cls.kafka_port, cls.kafka_ssl_port, cls.kafka_sasl_plain_port,
     cls.kafka_sasl_ssl_port) = kafka_server[:5]
    cls.ssl_folder = ssl_folder
    cls.acl_manager = acl_manager
    cls.kerberos_utils = kerberos_utils
    cls.hosts = [f"{cls.kafka_host}:{cls.kafka_port}"]
    cls.kafka_version = request.config.getoption("--docker-image").split(":")[-1].split("_")[-1]
