"""GROUP config resources (type 32): a group's consumer.* and share.* configs
set with IncrementalAlterConfigs and read with
DescribeConfigs, bounded by the broker's group.consumer.* and group.share.* settings."""
from __future__ import annotations

from samsa.broker.handlers.configs import (handle_describe_configs,
                                           handle_incremental_alter_configs)
from samsa.config.broker import BrokerConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from samsa.protocol.model import ApiKey

from .fakes import FakeServices, context

GROUP = 32
Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
Op = IncrementalAlterConfigsRequest.AlterableConfig
SET, DELETE = 0, 1


async def _alter(services: FakeServices, group: str, *ops: tuple[int, str, str | None],
                 validate_only: bool = False):
    req = IncrementalAlterConfigsRequest(resources=[Alter(
        resource_type=GROUP, resource_name=group,
        configs=[Op(name=n, config_operation=o, value=v) for o, n, v in ops])],
        validate_only=validate_only)
    resp = await handle_incremental_alter_configs(
        context(services, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1), req)
    [r] = resp.responses
    return r.error_code, r.error_message


async def _describe(services: FakeServices, group: str) -> dict[str, tuple[str | None, bool]]:
    resp = await handle_describe_configs(
        context(services, ApiKey.DESCRIBE_CONFIGS, 4),
        DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=GROUP, resource_name=group)]))
    [r] = resp.results
    assert r.error_code == 0
    return {c.name: (c.value, c.is_default) for c in r.configs}


async def test_a_groups_configs_are_set_described_and_deleted():
    services = FakeServices()
    assert await _describe(services, "g") == {
        "consumer.session.timeout.ms": ("45000", True),
        "consumer.heartbeat.interval.ms": ("5000", True),
        "share.session.timeout.ms": ("45000", True),
        "share.heartbeat.interval.ms": ("5000", True),
        "share.record.lock.duration.ms": ("30000", True),
        "share.delivery.count.limit": ("5", True),
        "share.partition.max.record.locks": ("2000", True),
        "share.auto.offset.reset": ("latest", True),
        "share.isolation.level": ("read_uncommitted", True)}
    assert await _alter(services, "g", (SET, "consumer.heartbeat.interval.ms", "6000")) == \
        (ErrorCode.NONE, None)
    assert (await _describe(services, "g"))["consumer.heartbeat.interval.ms"] == ("6000", False)
    assert (await _describe(services, "other"))["consumer.heartbeat.interval.ms"] == \
        ("5000", True)
    await _alter(services, "g", (DELETE, "consumer.heartbeat.interval.ms", None))
    assert (await _describe(services, "g"))["consumer.heartbeat.interval.ms"] == ("5000", True)


async def test_unknown_keys_and_values_out_of_the_brokers_bounds_are_refused():
    services = FakeServices()
    code, message = await _alter(services, "g", (SET, "consumer.session.timeout.ms", "1000"))
    assert code == ErrorCode.INVALID_CONFIG and "greater than or equal" in message
    code, _ = await _alter(services, "g", (SET, "no.such.key", "1"))
    assert code == ErrorCode.INVALID_CONFIG
    code, _ = await _alter(services, "g", (SET, "consumer.session.timeout.ms", "x"))
    assert code == ErrorCode.INVALID_CONFIG
    # validate_only changes nothing
    assert await _alter(services, "g", (SET, "consumer.session.timeout.ms", "50000"),
                        validate_only=True) == (ErrorCode.NONE, None)
    assert (await _describe(services, "g"))["consumer.session.timeout.ms"] == ("45000", True)


async def test_share_keys_are_bounded_as_kafkas_group_config_bounds_them():
    services = FakeServices()
    for name, value, why in (
            ("share.record.lock.duration.ms", "500", "at least 1000"),
            ("share.record.lock.duration.ms", "14999", "group.share.min.record.lock.duration.ms"),
            ("share.record.lock.duration.ms", "60001", "group.share.max.record.lock.duration.ms"),
            ("share.delivery.count.limit", "11", "group.share.max.delivery.count.limit"),
            ("share.session.timeout.ms", "44999", "group.share.min.session.timeout.ms"),
            ("share.heartbeat.interval.ms", "15001", "group.share.max.heartbeat.interval.ms"),
            ("share.auto.offset.reset", "newest", "share.auto.offset.reset"),
            ("share.auto.offset.reset", "by_duration:-PT1H", "share.auto.offset.reset"),
            ("share.isolation.level", "dirty", "String must be one of")):
        code, message = await _alter(services, "g", (SET, name, value))
        assert (code, why in (message or "")) == (ErrorCode.INVALID_CONFIG, True), (name, value)
    for name, value in (("share.record.lock.duration.ms", "15000"),
                        ("share.delivery.count.limit", "2"),
                        ("share.auto.offset.reset", "earliest"),
                        ("share.auto.offset.reset", "by_duration:PT1H30M"),
                        ("share.isolation.level", "read_committed")):
        assert await _alter(services, "g", (SET, name, value)) == (ErrorCode.NONE, None)
        assert (await _describe(services, "g"))[name] == (value, False)


async def test_a_session_timeout_must_be_longer_than_the_heartbeat_interval():
    services = FakeServices(config=BrokerConfig.from_dict({
        "broker.id": 1, "log.dirs": "/nonexistent",
        "group.share.max.heartbeat.interval.ms": 60000}))
    code, message = await _alter(services, "g", (SET, "share.heartbeat.interval.ms", "45000"))
    assert code == ErrorCode.INVALID_CONFIG
    assert message == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
