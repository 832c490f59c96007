"""Partition logs on disk in Apache Kafka's own format (see DESIGN.md, storage/)."""
from storage.log import AppendOrigin, AppendResult, Log, ReadResult
from storage.manager import LogManager
from storage.segment import FileRegion, LogSegment

__all__ = ["AppendOrigin", "AppendResult", "FileRegion", "Log", "LogManager", "LogSegment", "ReadResult"]
