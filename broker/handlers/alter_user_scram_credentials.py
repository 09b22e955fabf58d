"""AlterUserScramCredentials (key 51), version 0.

Creates, replaces and deletes users' SCRAM credentials as Kafka's controller does: the client sends the
salt and the salted password (it ran PBKDF2), the broker keeps the derived StoredKey and ServerKey. Each
user is altered at most once per request (DUPLICATE_RESOURCE otherwise); an empty name is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
4096-16384 UNACCEPTABLE_CREDENTIAL, deleting a credential that does not exist RESOURCE_NOT_FOUND. The
accepted changes are written together before the answer (to the data directory of a single node, to
ZooKeeper's ``/config/users`` in a cluster, where every broker follows them), and a user authenticates
with a new credential at once.
With an authorizer, ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED for every user).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from trafka.wire.protocol import ApiKey

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    message = ctx.cluster_refusal(AclOperation.ALTER)
    if message is not None:
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=message)
            for user in users])
    from trafka.broker.security.credentials import Deletion, Upsertion

    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    results = await ctx.broker.alter_scram_credentials(deletions, upsertions)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[Result(user=r.user, error_code=r.error, error_message=r.message) for r in results])
