"""Elements encoded ahead of time (api.preencode) encode exactly as the plain objects.

The broker answers Metadata from topic entries encoded once per metadata change;
these tests hold that splicing them in gives the very bytes the generated encoder
writes for the plain objects, at every version, including an element encoded for
another version (it falls back to encoding its value)."""
from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from samsa.protocol.messages import (DescribeTopicPartitionsResponse, FetchResponse,
                                     MetadataResponse, RequestHeader, encode_response)
from samsa.protocol.messages.api import preencode
from samsa.protocol.messages.codegen import PREENCODABLE
from samsa.protocol.messages.model import Message, Preencoded
from tests.protocol.test_messages_strategies import message_strategy

CHECK = settings(max_examples=6, deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))
CASES = [(MetadataResponse, v) for v in range(0, 14)]


def _struct_arrays(obj: Message) -> list[list[Message]]:
    spec = type(obj)._spec
    assert spec is not None
    return [getattr(obj, f.attr) for f in spec.fields
            if f.kind == "array" and f.elem == "struct" and getattr(obj, f.attr)]


def _preencoded(top: type[Message], obj: Message, version: int, pick: st.DataObject) -> None:
    """Replace, depth first, some elements of ``obj``'s preencodable struct arrays (in
    place) by preencoded ones: for this version, for another one, or left plain."""
    for array in _struct_arrays(obj):
        for i, element in enumerate(array):
            _preencoded(top, element, version, pick)
            if (top.__name__, type(element).__name__) not in PREENCODABLE:
                continue
            lo, hi = top._message.valid
            how = pick.draw(st.sampled_from(["plain", "this", "other"]))
            if how == "this":
                array[i] = preencode(top, element, version)
            elif how == "other" and lo < hi:
                other = pick.draw(st.integers(lo, hi).filter(lambda x: x != version))
                array[i] = preencode(top, element, other)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-v{c[1]}")
def test_preencoded_elements_encode_byte_for_byte_as_plain_ones(case):
    top, v = case

    @CHECK
    @given(plain=message_strategy(top, v), pick=st.data())
    def check(plain, pick):
        hdr = RequestHeader(0, v, 7, "c")
        expected = encode_response(hdr, plain)
        mixed = object.__new__(top)
        for a in top._attrs:   # a shallow copy whose arrays are new lists
            value = getattr(plain, a)
            setattr(mixed, a, list(value) if isinstance(value, list) else value)
        _preencoded(top, mixed, v, pick)
        assert encode_response(hdr, mixed) == expected
        assert mixed == plain and mixed.to_dict() == plain.to_dict()

    check()


def test_a_preencoded_element_reads_as_its_value():
    R = MetadataResponse
    topic = R.MetadataResponseTopic(name="orders", partitions=[
        R.MetadataResponsePartition(partition_index=3, leader_id=2)])
    pre = preencode(R, topic, 12)
    assert isinstance(pre, Preencoded)
    assert pre.name == "orders" and pre.partitions[0].leader_id == 2
    assert pre == topic and topic == pre and repr(pre) == repr(topic)
    with pytest.raises(ValueError):   # not a struct of that message
        preencode(FetchResponse, topic, 12)


def test_a_preencoded_element_copies_and_pickles_as_itself():
    R = MetadataResponse
    pre = preencode(R, R.MetadataResponseTopic(name="orders"), 12)
    for twin in (copy.copy(pre), copy.deepcopy(pre), pickle.loads(pickle.dumps(pre))):
        assert isinstance(twin, Preencoded) and twin == pre and twin.name == "orders"
        assert encode_response(RequestHeader(3, 12, 1, "c"), R(topics=[twin])) == \
            encode_response(RequestHeader(3, 12, 1, "c"), R(topics=[pre]))


def test_only_declared_arrays_take_preencoded_elements():
    """Produce and Fetch encoders carry no check for pre-encoded elements: preencode
    refuses every struct but the declared ones, so none can reach an encoder unchecked."""
    R = FetchResponse
    with pytest.raises(ValueError, match="PREENCODABLE"):
        preencode(R, R.FetchableTopicResponse(topic="t"), 12)
    R2 = DescribeTopicPartitionsResponse
    with pytest.raises(ValueError, match="PREENCODABLE"):
        preencode(R2, R2.DescribeTopicPartitionsResponseTopic(name="t"), 0)
