# The C column decoder (_columns.c, built by setup.py where it can be); columns.py holds
# its pure-Python twin and documents both. Positional arguments only (METH_FASTCALL).
from samsa.protocol.model import Buf

def decode_records(data: Buf, pos: int, end: int, count: int, base_offset: int,
                   base_timestamp: int, max_timestamp: int, timestamp_type: int, min_offset: int,
                   end_offset: int, cols: tuple[bytearray, ...], /) -> int: ...

def next_fetch_offset(records: Buf, position: int, /) -> int: ...
