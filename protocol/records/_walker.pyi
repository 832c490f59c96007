# The C record walker (_walker.c, built by setup.py where it can be); walker.py holds
# its pure-Python twin and documents both. Positional arguments only (METH_FASTCALL).
from samsa.protocol.model import Buf
from samsa.protocol.records.walker import RecordFields

def walk_records(buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                 fields: list[RecordFields] | None, first: int = 0, /) -> None: ...
def walk_prefix(buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                first: int, /) -> tuple[int, int]: ...
