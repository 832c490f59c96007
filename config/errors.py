"""The one exception config/ raises for bad configuration.

A bad config must refuse to start the broker with a message that names the
key, the offending value and what would have been accepted, so the operator can
fix the file without reading our source.
"""
from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value (or override, or file line) that cannot be used.

    `key`, `value` and `allowed` are kept as attributes so callers (e.g. the
    CreateTopics / AlterConfigs handlers) can build their own error messages;
    `str()` always names all three.
    """

    def __init__(self, key: str, value: object, allowed: str, message: str | None = None):
        self.key = key
        self.value = value
        self.allowed = allowed
        if message is None:
            message = f"invalid value {_show(value)} for {key}: expected {allowed}"
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, object, str, str | None]]:
        # keep picklable across process boundaries
        return (type(self), (self.key, self.value, self.allowed, self.message))


def _show(value: object) -> str:
    if value is None:
        return "null"
    return repr(str(value))
