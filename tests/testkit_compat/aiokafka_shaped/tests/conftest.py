"""Fixtures as aiokafka 0.14's tests/conftest.py has them: Kafka comes from a Docker
image given by --docker-image, every integration test skips without one, the
certificates are made by running that image, and kafka_server yields an object
read by attribute (host, port, ..., container, hosts)."""
import asyncio
import pathlib
from dataclasses import dataclass

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
def kafka_image(request, docker):
    image = request.config.getoption("--docker-image")
    if not image:
        pytest.skip("Skipping functional test as `--docker-image` not provided")
    if not request.config.getoption("--no-pull"):
        docker.images.pull(image)
    return image


@pytest.fixture(scope="session")
def ssl_folder(docker, kafka_image, tmp_path_factory):
    folder = pathlib.Path(tmp_path_factory.mktemp("ssl_cert"))
    docker.containers.run(image=kafka_image, command="bash /gen-ssl-certs.sh", remove=True)
    return folder


@dataclass
class KafkaServer:
    host: str
    port: int
    ssl_port: int
    sasl_plain_port: int
    sasl_ssl_port: int
    container: object

    @property
    def hosts(self):
        return [f"{self.host}:{self.port}"]


@pytest.fixture(scope="session")
def kafka_server(kafka_image, docker, ssl_folder):
    container = docker.containers.run(image=kafka_image, detach=True)
    yield KafkaServer("127.0.0.1", 9092, 9093, 9094, 9095, container)
    container.stop()


@pytest.fixture(scope="class")
def acl_manager(kafka_server, request):
    from ._testutil import ACLs
    return ACLs(kafka_server.container, request.config.getoption("--docker-image").split(":")[-1])


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
    cls.kafka_host, cls.kafka_port = kafka_server.host, kafka_server.port
    cls.kafka_ssl_port, cls.kafka_sasl_ssl_port = kafka_server.ssl_port, kafka_server.sasl_ssl_port
    cls.kafka_sasl_plain_port = kafka_server.sasl_plain_port
    cls.ssl_folder = ssl_folder
    cls.acl_manager = acl_manager
    cls.kerberos_utils = kerberos_utils
    cls.hosts = kafka_server.hosts
    cls.kafka_version = request.config.getoption("--docker-image").split(":")[-1].split("_")[-1]
