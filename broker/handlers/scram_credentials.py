"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51),
KIP-554: SCRAM credentials in the users' entity configs, with the checks and
errors of Kafka's ZkAdminManager (RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE,
UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL). The client sends a
salted password, never the password; the broker stores only the derived
StoredKey/ServerKey. Writing the entity config is what makes every broker
see the credential (ZooKeeper: /config/users/<user> plus a change notice)."""
from __future__ import annotations

from collections import Counter

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                               DescribeUserScramCredentialsRequest,
                               DescribeUserScramCredentialsResponse)

from ..metadata.zk_layout import desanitize_entity_name, user_entity_path
from samsa.client.scram_credential import (MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS,
                                              ScramCredential, credential_from_salted)
from . import authz
from .authz import Op
from .context import RequestContext, off_loop
from .services import MetadataView, ScramCredentials

AlterR = AlterUserScramCredentialsResponse
DescribeR = DescribeUserScramCredentialsResponse

USERNAME_EMPTY = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


def _credential_infos(configs: dict[str, str]) -> list[DescribeR.CredentialInfo]:
    infos = []
    for mechanism_type, name in MECHANISM_TYPES.items():
        if name in configs:
            infos.append(DescribeR.CredentialInfo(
                mechanism=mechanism_type,
                iterations=ScramCredential.from_config(configs[name]).iterations))
    return infos


def _describe(store: MetadataView, users: list[str] | None) -> DescribeR:
    results = []
    if not users:
        for path in store.entity_config_paths("users"):
            parts = path.split("/")
            if len(parts) != 2:
                continue  # a user/client pair: quotas only
            infos = _credential_infos(store.entity_configs(path))
            if infos:
                results.append(DescribeR.DescribeUserScramCredentialsResult(
                    user=desanitize_entity_name(parts[1]), error_code=0, error_message=None,
                    credential_infos=infos))
        results.sort(key=lambda r: r.user)
        return DescribeR(throttle_time_ms=0, error_code=0, error_message=None, results=results)
    counts = Counter(users)
    message: str | None
    for user in dict.fromkeys(users):  # each user once, in request order
        if not user:
            code, message, infos = ErrorCode.RESOURCE_NOT_FOUND, USERNAME_EMPTY, []
        elif counts[user] > 1:
            code, message, infos = (ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                                    f"credentials for the same user twice in a single request: "
                                    f"{user}", [])
        else:
            try:
                infos = _credential_infos(store.entity_configs(user_entity_path(user)))
            except ValueError as e:  # a credential someone wrote by hand, badly
                code, message, infos = (ErrorCode.UNKNOWN_SERVER_ERROR, "Error processing "
                                        f"describe user SCRAM credential configs request: {e}", [])
            else:
                code, message = ((ErrorCode.NONE, None) if infos else
                                 (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user "
                                  f"credential that does not exist: {user}"))
        results.append(DescribeR.DescribeUserScramCredentialsResult(
            user=user, error_code=code, error_message=message, credential_infos=infos))
    return DescribeR(throttle_time_ms=0, error_code=0, error_message=None, results=results)


async def handle_describe_user_scram_credentials(ctx: RequestContext, req: DescribeUserScramCredentialsRequest
                                                 ) -> DescribeUserScramCredentialsResponse:
    users = None if req.users is None else [u.name for u in req.users]
    if not authz.cluster(ctx, Op.DESCRIBE):  # Kafka: Describe on the cluster
        # the refusal, for the request and each user asked about (librdkafka
        # aborts the whole client on a null message here)
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_DENIED
        return DescribeR(throttle_time_ms=0, error_code=code, error_message=message, results=[
            DescribeR.DescribeUserScramCredentialsResult(
                user=user, error_code=code, error_message=message, credential_infos=[])
            for user in users or ()])
    return await off_loop(_describe, ctx.broker.store, users)


def _alter(store: MetadataView, credentials: ScramCredentials,
           upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion],
           deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion]) -> AlterR:
    failed: dict[str, tuple[int, str]] = {}

    def fail(user: str, code: int, message: str) -> None:
        failed.setdefault(user, (code, message))

    for u in upsertions:
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
        elif u.mechanism not in MECHANISM_TYPES:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    for d in deletions:
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
        elif d.mechanism not in MECHANISM_TYPES:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    # (user, mechanism) of every upsertion and deletion, in the request's order
    named = [(x.name, x.mechanism) for x in upsertions] + [(x.name, x.mechanism) for x in deletions]
    pairs = Counter((name, mechanism) for name, mechanism in named if name not in failed)
    for (user, _), n in pairs.items():
        if n > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
    users = dict.fromkeys(name for name, _ in named if name not in failed)
    configs = {user: store.entity_configs(user_entity_path(user)) for user in users}
    for d in deletions:
        if d.name in configs and MECHANISM_TYPES[d.mechanism] not in configs[d.name]:
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
    succeeded = []
    for user, current in configs.items():
        if user in failed:
            continue
        updated = dict(current)
        for d in deletions:
            if d.name == user:
                updated.pop(MECHANISM_TYPES[d.mechanism], None)
        for u in upsertions:
            if u.name == user:
                mechanism = MECHANISM_TYPES[u.mechanism]
                updated[mechanism] = credential_from_salted(
                    mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations).to_config()
        store.set_entity_configs(user_entity_path(user), updated)
        # this broker's cache now, not when the change notice comes round (ZooKeeper)
        credentials.reload(user_entity_path(user))
        succeeded.append(user)
    results = [AlterR.AlterUserScramCredentialsResult(user=user, error_code=code,
                                                      error_message=message)
               for user, (code, message) in failed.items()]
    results += [AlterR.AlterUserScramCredentialsResult(user=user, error_code=0,
                                                       error_message=None)
                for user in succeeded]
    return AlterR(throttle_time_ms=0, results=results)


async def handle_alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest
                                              ) -> AlterUserScramCredentialsResponse:
    if not authz.cluster(ctx, Op.ALTER):  # Kafka: Alter on the cluster, every user refused
        users = sorted({u.name for u in req.upsertions} | {d.name for d in req.deletions})
        return AlterR(throttle_time_ms=0, results=[AlterR.AlterUserScramCredentialsResult(
            user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=authz.CLUSTER_DENIED) for user in users])
    return await off_loop(_alter, ctx.broker.store, ctx.broker.scram_credentials,
                          list(req.upsertions), list(req.deletions))

