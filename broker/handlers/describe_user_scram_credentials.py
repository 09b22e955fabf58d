"""DescribeUserScramCredentials (key 50), version 0.

The SCRAM mechanisms and iteration counts of users' credentials (never the credentials themselves):
every user with one when no user is named; otherwise each user named, RESOURCE_NOT_FOUND for one without
credentials and DUPLICATE_RESOURCE for one named twice, with Kafka's messages
(``trafka.broker.security.credentials``).
With an authorizer, DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse
from trafka.wire.protocol import ApiKey

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        # As Kafka answers: the error at the top and once per user asked for, without the user's name (Kafka
        # fails to answer at all when no user is named; trafka gives the top-level error alone).
        refusal, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=refusal, error_message=message,
            results=[Result(user="", error_code=refusal, error_message=message, credential_infos=[])
                     for _ in request.users or ()])
    users = None if request.users is None else [user.name for user in request.users]
    described = ctx.broker.scram_credentials().describe(users)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",  # "" as Kafka answers, not null
        results=[Result(user=d.user, error_code=d.error, error_message=d.message,
                        credential_infos=[Info(mechanism=m, iterations=i) for m, i in d.credentials])
                 for d in described])
