"""DescribeConfigs: a topic's and this broker's configs, and the errors for others."""
from __future__ import annotations

from samsa.broker.handlers.configs import handle_describe_configs
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import DescribeConfigsRequest
from samsa.protocol.model import ApiKey

from .fakes import FakeServices, context

TOPIC, BROKER = 2, 4
Res = DescribeConfigsRequest.DescribeConfigsResource


async def _describe(services: FakeServices, *resources: Res):
    return await handle_describe_configs(context(services, ApiKey.DESCRIBE_CONFIGS, 4),
                                         DescribeConfigsRequest(resources=list(resources)))


async def test_a_topics_override_and_its_defaults_are_described():
    services = FakeServices()
    services.topics.add("t", configs={"retention.ms": "1000"})
    resp = await _describe(services, Res(resource_type=TOPIC, resource_name="t",
                                         configuration_keys=["retention.ms", "cleanup.policy"]))
    [result] = resp.results
    assert result.error_code == 0
    values = {c.name: (c.value, c.is_default) for c in result.configs}
    assert values == {"retention.ms": ("1000", False), "cleanup.policy": ("delete", True)}


async def test_unknown_topics_invalid_names_and_other_brokers_are_errors():
    resp = await _describe(FakeServices(),
                           Res(resource_type=TOPIC, resource_name="nope"),
                           Res(resource_type=TOPIC, resource_name="bad/name"),
                           Res(resource_type=BROKER, resource_name="7"),
                           Res(resource_type=99, resource_name="x"))
    assert [r.error_code for r in resp.results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]


async def test_this_brokers_config_is_described_by_its_id():
    resp = await _describe(FakeServices(), Res(resource_type=BROKER, resource_name="1",
                                               configuration_keys=["broker.id"]))
    [result] = resp.results
    assert result.error_code == 0
    assert [(c.name, c.value) for c in result.configs] == [("broker.id", "1")]
