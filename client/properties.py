"""How a samsa tool turns its client-property flags into a SASL login and a
TLS context.

Kafka's tools take Kafka client properties from a file (``--command-config``,
``--producer.config``, ``--admin.config`` ...) and, some of them, from
repeatable ``KEY=VALUE`` flags over it (``--producer-property``,
``--command-property`` ...). This module is that argparse side: the flags, the
file and overrides merged, and the security they ask for (security.protocol,
sasl.*, ssl.*). What a tool does with the login and the context once it has
them (connect, send requests) is ``client/blocking.py``'s.
"""
from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple

from samsa.client.sasl import SaslClientSettings, sasl_client_settings


def key_value_properties(items: Iterable[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` arguments (``--property``, ``--producer-property`` ...) as a
    dict, the later of a repeated key winning; ValueError for one without '='."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expects key=value, got {item!r}")
        out[key.strip()] = value
    return out


class ClientConfig(NamedTuple):
    """A tool's Kafka client properties and the security they ask for."""

    properties: dict[str, str]
    sasl: SaslClientSettings | None
    tls: ssl.SSLContext | None


def client_security(props: Mapping[str, str], source: str
                    ) -> tuple[SaslClientSettings | None, ssl.SSLContext | None]:
    """The SASL login and TLS context that Kafka client properties ask for
    (security.protocol, sasl.*, ssl.*); ValueError naming what is wrong.
    ``source`` names where the properties came from, for messages."""
    from samsa.client.tls import client_tls
    return sasl_client_settings(props), client_tls(props, source)


@dataclass(frozen=True)
class ClientConfigFlags:
    """The flags with which one of Kafka's tools takes client properties: a
    properties file (``--producer.config``, ``--command-config`` ...) and
    optionally repeatable ``KEY=VALUE`` overrides of it (``--producer-property``).
    Where Kafka has two names for one (KIP-1147 renamed them ``--command-config``
    and ``--command-property`` in 4.2, keeping the old ones), both are taken
    and refused together, as Kafka refuses them. Keys a tool does not use are
    ignored, as Kafka's tools hand every key to the client."""

    files: tuple[str, ...]
    overrides: tuple[str, ...] = ()

    @staticmethod
    def _dest(flag: str) -> str:
        return "client_config_" + flag.lstrip("-").replace("-", "_").replace(".", "_")

    def add_to(self, parser: argparse.ArgumentParser, client: str, uses: str = "") -> None:
        """Add the flags to ``parser``; ``client`` says whose properties they
        are in the help ("producer", "admin client"), ``uses`` which keys
        other than the security ones the tool reads."""
        keys = (f"{uses}, " if uses else "") + (
            "security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), sasl.mechanism "
            "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config, ssl.truststore.* and "
            "ssl.keystore.* (PEM); other keys are ignored")
        later = f"; {self.overrides[0]} takes precedence" if self.overrides else ""
        helps = [f"{client} config properties file: {keys}{later}"]
        if self.overrides:
            helps.append(f"a {client} config property (repeatable), as in {self.files[0]}")
        for flags, metavar, action, text in ((self.files, "FILE", "store", helps[0]),
                                             (self.overrides, "KEY=VALUE", "append", helps[-1])):
            if not flags:
                continue  # (argparse cannot print an empty group in the usage)
            group = parser.add_mutually_exclusive_group()
            for i, flag in enumerate(flags):
                group.add_argument(flag, metavar=metavar, action=action, dest=self._dest(flag),
                                   help=text if i == 0 else
                                   f"the same as {flags[0]} (its name since Kafka 4.2)")

    def _given(self, flags: tuple[str, ...], args: argparse.Namespace) -> str | None:
        return next((f for f in flags if getattr(args, self._dest(f), None) is not None), None)

    def given(self, args: argparse.Namespace) -> bool:
        """Whether any of the flags was given."""
        return self._given(self.files + self.overrides, args) is not None

    def load(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> ClientConfig:
        """The file, then the overrides over it, and the security they ask
        for; anything that cannot be used ends the tool with one usage error
        line naming the flag (argparse's exit 2)."""
        file_flag = self._given(self.files, args)
        override_flag = self._given(self.overrides, args)
        props: dict[str, str] = {}
        source = []
        if file_flag is not None:
            path = getattr(args, self._dest(file_flag))
            source.append(f"{file_flag} {path}")
            from samsa.config.properties import load_properties
            try:
                props.update(load_properties(path))
            except OSError as e:
                parser.error(f"{source[0]}: {e.strerror or e}")
            except ValueError as e:
                parser.error(f"{source[0]}: {e}")
        if override_flag is not None:
            source.append(override_flag)
            try:
                props.update(key_value_properties(getattr(args, self._dest(override_flag))))
            except ValueError as e:
                parser.error(f"{override_flag} {e}")
        where = " with ".join(source) or self.files[0]
        try:
            sasl, tls = client_security(props, where)
        except (OSError, ValueError) as e:
            parser.error(f"{where}: {e}")
        return ClientConfig(props, sasl, tls)


def command_config_security(path: str | None
                            ) -> tuple[SaslClientSettings | None, ssl.SSLContext | None]:
    """The SASL login and the TLS context of a tool's ``--command-config``
    file; neither without a file. OSError/ValueError name what is wrong."""
    if not path:
        return None, None
    from samsa.config.properties import load_properties
    return client_security(load_properties(path), f"--command-config {path}")


def add_command_config(parser: argparse.ArgumentParser) -> None:
    """``--command-config FILE``, as Kafka's admin tools take it."""
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties: security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.*, ssl.keystore.*")


def command_config_or_exit(parser: argparse.ArgumentParser, path: str | None
                           ) -> tuple[SaslClientSettings | None, ssl.SSLContext | None]:
    """command_config_security, or the tool's one-line usage error naming the file."""
    try:
        return command_config_security(path)
    except (OSError, ValueError) as e:
        parser.error(f"--command-config {path}: {e}")
