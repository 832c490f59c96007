"""The base class aiokafka's integration tests share, in shape: a unittest class
with the broker's address on it and coroutine tests run on the class's loop."""
import asyncio
import functools
import unittest
import uuid

import pytest


def run_until_complete(test):
    @functools.wraps(test)
    def run(self, *args, **kwargs):
        return self.loop.run_until_complete(asyncio.wait_for(test(self, *args, **kwargs), 60))
    return run


class ACLs:
    """Runs kafka-acls.sh in the broker's container."""

    def __init__(self, container, tag):
        self.container, self.tag, self.added = container, tag, []

    def add_acl(self, **acl):
        code, output = self.container.exec_run(f"/opt/kafka_{self.tag}/bin/kafka-acls.sh --add")
        if code != 0:
            raise RuntimeError("Failed to apply ACL")
        self.added.append(acl)

    def cleanup(self):
        self.added.clear()


@pytest.mark.usefixtures("setup_test_class")
class KafkaIntegrationTestCase(unittest.TestCase):
    def setUp(self):
        self.topic = f"topic-{uuid.uuid4().hex[:10]}"
