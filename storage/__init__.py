"""Partition logs on disk in Apache Kafka's own format (see DESIGN.md, storage/)."""
from storage.log import AppendResult, Log, ReadResult
from storage.segment import FileRegion, LogSegment

__all__ = ["AppendResult", "FileRegion", "Log", "LogManager", "LogSegment", "ReadResult"]


def __getattr__(name):  # LogManager imports log; keep the import order one-way
    if name == "LogManager":
        from storage.manager import LogManager
        return LogManager
    raise AttributeError(name)
