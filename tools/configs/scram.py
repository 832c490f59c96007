"""The SCRAM part of ``samsa configs --entity-type users``, as kafka-configs does it:

    samsa configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    samsa configs ... --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256
    samsa configs ... --describe --entity-type users [--entity-name alice]

Through AlterUserScramCredentials / DescribeUserScramCredentials: the password
is salted and hashed here (a random salt, PBKDF2 with the given iterations,
4096 when not given) and only the salted password goes over the wire.
"""
from __future__ import annotations

import os
import sys

from samsa.protocol.errors import ErrorCode

from samsa.protocol.messages import (AlterUserScramCredentialsRequest as Alter,
                               DescribeUserScramCredentialsRequest as Describe)
from samsa.protocol.model import ApiKey

from samsa.client.blocking import SimpleClient, error_text
from samsa.client.scram_credential import (MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS,
                                             TYPE_OF_MECHANISM, salted_password)

RESOURCE_NOT_FOUND = ErrorCode.RESOURCE_NOT_FOUND


def is_scram_key(key: str) -> bool:
    return key in TYPE_OF_MECHANISM


def _upsertion(user: str, mechanism: str, value: str) -> Alter.ScramCredentialUpsertion:
    """``iterations=8192,password=secret`` -> an upsertion; ValueError if malformed."""
    fields = {}
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"{mechanism}: expected [iterations=N,password=P], got {value!r}")
        fields[key.strip()] = val
    unknown = set(fields) - {"iterations", "password"}
    if unknown or "password" not in fields:
        raise ValueError(f"{mechanism}: expected [iterations=N,password=P], got {value!r}")
    try:
        iterations = int(fields.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise ValueError(f"{mechanism}: iterations must be a number") from None
    salt = os.urandom(32)
    # A hopeless iteration count is the broker's to refuse (UNACCEPTABLE_CREDENTIAL).
    salted = (salted_password(mechanism, fields["password"], salt, iterations)
              if MIN_ITERATIONS <= iterations <= MAX_ITERATIONS else b"")
    return Alter.ScramCredentialUpsertion(name=user, mechanism=TYPE_OF_MECHANISM[mechanism],
                                          iterations=iterations, salt=salt,
                                          salted_password=salted)


def alter(client: SimpleClient, user: str, adds: dict[str, str], deletes: list[str], *,
          announce: bool = True) -> int:
    try:
        upsertions = [_upsertion(user, m, v) for m, v in adds.items()]
    except ValueError as e:
        print(f"samsa configs: --add-config: {e}", file=sys.stderr)
        return 2
    deletions = [Alter.ScramCredentialDeletion(name=user, mechanism=TYPE_OF_MECHANISM[m])
                 for m in deletes]
    resp = client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, Alter(deletions=deletions, upsertions=upsertions))
    for result in resp.results:
        if result.error_code:
            print(f"Error while executing config command: "
                  f"{error_text(result.error_code, result.error_message)}", file=sys.stderr)
            return 1
    if announce:
        print(f"Completed updating config for user {user}.")
    return 0


def describe(client: SimpleClient, user: str | None, *, quiet_if_none: bool = False) -> int:
    """``quiet_if_none``: a user without credentials is not an error (the
    user's quotas were described alongside)."""
    users = None if user is None else [Describe.UserName(name=user)]
    resp = client.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, Describe(users=users))
    if resp.error_code:
        print(f"Error while describing SCRAM credentials: "
              f"{error_text(resp.error_code, resp.error_message)}", file=sys.stderr)
        return 1
    for result in resp.results:
        if result.error_code == RESOURCE_NOT_FOUND and quiet_if_none:
            continue
        if result.error_code:
            print(f"Error retrieving SCRAM credential configs for user-principal "
                  f"'{result.user}': {error_text(result.error_code, result.error_message)}")
            continue
        text = ", ".join(f"{MECHANISM_TYPES.get(c.mechanism, c.mechanism)}=iterations="
                         f"{c.iterations}" for c in result.credential_infos)
        print(f"SCRAM credential configs for user-principal '{result.user}' are {text}")
    return 0
