"""Which APIs a broker advertises in ApiVersions, on every listener: Kafka
scopes an API by listener *type* (its JSON schema's "listeners": a broker's
listeners, or a KRaft controller's), not by listener name, so its broker
advertises the share coordinator's inter-broker APIs (83-87, "listeners":
["broker"], cluster actions as WriteTxnMarkers is) to any client that asks,
on client and inter-broker listeners alike; a client without CLUSTER_ACTION
is refused by the APIs themselves."""
from __future__ import annotations

from samsa.broker.server import advertised_apis
from samsa.protocol.model import ApiKey


def test_the_share_coordinators_apis_are_advertised_as_kafkas_broker_does():
    versions = {s.key: (s.min_version, s.max_version) for s in advertised_apis()}
    for key in (ApiKey.WRITE_TXN_MARKERS, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
                ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY):
        assert key in versions, key.name
    assert versions[ApiKey.INITIALIZE_SHARE_GROUP_STATE] == (0, 0)
