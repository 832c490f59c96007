"""Any group the coordinator keeps, whatever its type: the runtime and the
offsets flows use only what every type has (id, type, state, members,
committed and pending offsets)."""
from __future__ import annotations

from typing import TypeAlias

from .classic import Group
from .consumer import ConsumerGroup

AnyGroup: TypeAlias = Group | ConsumerGroup
