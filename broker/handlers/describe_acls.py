"""DescribeAcls (key 29), versions 1-3 (Kafka 4 serves no v0).

The ACL bindings one filter matches (``trafka.broker.security.acls``; ZooKeeper in a cluster), grouped by
resource pattern, as Kafka answers: the principal needs DESCRIBE on the cluster (else
CLUSTER_AUTHORIZATION_FAILED); without an authorizer the answer is SECURITY_DISABLED, "No Authorizer is
configured on the broker". None name, principal and host and the ANY enums match anything; the MATCH
pattern type with a name matches the bindings that apply to that resource (its LITERAL name, the ``*``
wildcard, the PREFIXED patterns it starts with). A code Kafka does not know reads as UNKNOWN and matches
nothing; a code of 0 (UNKNOWN) is a request Kafka cannot read: the connection is closed, as Kafka closes
it.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import CloseConnection, RequestContext, handles
from trafka.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    operation,
    pattern_type,
    permission_type,
    resource_type,
)
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeAclsRequest, DescribeAclsResponse
from trafka.wire.protocol import ApiKey

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


def request_filter(request: DescribeAclsRequest) -> AclBindingFilter:
    return AclBindingFilter(resource_type(request.resource_type_filter), request.resource_name_filter,
                            pattern_type(request.pattern_type_filter), request.principal_filter,
                            request.host_filter, operation(request.operation), permission_type(request.permission_type))


def grouped(bindings: list[AclBinding]) -> list[Resource]:
    """The bindings by resource pattern, as DescribeAcls carries them."""
    resources: dict[tuple, list[AclBinding]] = {}
    for binding in bindings:
        resources.setdefault((binding.resource_type, binding.resource_name, binding.pattern_type), []).append(binding)
    return [Resource(resource_type=rt, resource_name=name, pattern_type=pt, acls=[
        Description(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type)
        for b in members]) for (rt, name, pt), members in resources.items()]


@handles(ApiKey.DESCRIBE_ACLS, 1, 3)
async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if not (request.resource_type_filter and request.pattern_type_filter and request.operation
            and request.permission_type):
        raise CloseConnection("DescribeAcls with UNKNOWN elements")
    acl_filter = request_filter(request)
    broker = ctx.broker
    if broker.authorizer is None or broker.acls is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker", resources=[])
    refusal = ctx.cluster_refusal(AclOperation.DESCRIBE)
    if refusal is not None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=refusal, resources=[])
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                                resources=grouped(broker.acls.describe(acl_filter)))
