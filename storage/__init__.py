"""Partition logs on disk in Apache Kafka's own format (see DESIGN.md, storage/)."""
from samsa.storage.log import AppendOrigin, AppendResult, Log, ReadResult
from samsa.storage.manager import LogManager
from samsa.storage.segment import FileRegion, LogSegment

__all__ = ["AppendOrigin", "AppendResult", "FileRegion", "Log", "LogManager", "LogSegment", "ReadResult"]
