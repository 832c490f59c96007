"""Share groups' meters: counts per acknowledgement type (Kafka's ack-type
names), and rates over a 30 s window, on a virtual clock."""
from __future__ import annotations

from samsa.broker.groups.share.metrics import ShareMetrics, share_group_states


def test_acknowledgements_are_counted_by_type_and_rated_over_the_window():
    now = [0]
    m = ShareMetrics(lambda: now[0])
    m.acknowledged(10, 14, [1])            # five accepted
    m.acknowledged(15, 18, [2, 3, 0, 1])   # a release, a reject, a gap, an accept
    assert m.acknowledgements.count == 9
    assert dict((s["ack_type"], v) for s, v in m.record_samples(rate=False)) == {
        "Accept": 6, "Release": 1, "Reject": 1}
    assert m.acknowledgements.rate() == 9 / 30
    now[0] = 30_000  # the window has passed: the rate falls, the count stays
    assert m.acknowledgements.rate() == 0
    assert m.acknowledgements.count == 9


def test_share_group_counts_by_state():
    assert share_group_states(["Stable", "Empty", "Stable"]) == [
        ({"state": "empty"}, 1.0), ({"state": "stable"}, 2.0), ({"state": "dead"}, 0.0)]
