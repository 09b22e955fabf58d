"""DeleteAcls (key 31), versions 1-3 (Kafka 4 serves no v0).

Deletes the ACL bindings each filter matches (``trafka.broker.security.acls``; ZooKeeper in a cluster), as
Kafka does: the principal needs ALTER on the cluster (else every filter is answered
CLUSTER_AUTHORIZATION_FAILED); without an authorizer every filter is answered SECURITY_DISABLED. Each
filter is answered with the bindings it matched among those in force when the request came (a binding two
filters match is reported by both); None names and principals and hosts, ANY enums and the MATCH pattern
type match as in DescribeAcls. A filter with a code Kafka does not know (read as UNKNOWN) is answered
INVALID_REQUEST alone; a code of 0 (UNKNOWN) is a request Kafka cannot read: the connection is closed, as
Kafka closes it.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import CloseConnection, RequestContext, handles
from trafka.broker.security.authorizer import (
    AclBindingFilter,
    AclOperation,
    operation,
    pattern_type,
    permission_type,
    resource_type,
)
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DeleteAclsRequest, DeleteAclsResponse
from trafka.wire.protocol import ApiKey

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def request_filter(wanted: DeleteAclsRequest.DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(resource_type(wanted.resource_type_filter), wanted.resource_name_filter,
                            pattern_type(wanted.pattern_type_filter), wanted.principal_filter, wanted.host_filter,
                            operation(wanted.operation), permission_type(wanted.permission_type))


@handles(ApiKey.DELETE_ACLS, 1, 3)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    if not all(f.resource_type_filter and f.pattern_type_filter and f.operation and f.permission_type
               for f in request.filters):
        raise CloseConnection("DeleteAcls with UNKNOWN elements")
    filters = [request_filter(wanted) for wanted in request.filters]
    broker = ctx.broker
    if broker.authorizer is None or broker.acls is None:
        return _all(filters, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    refusal = ctx.cluster_refusal(AclOperation.ALTER)
    if refusal is not None:
        return _all(filters, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, refusal)
    results = await broker.acls.delete(filters)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=r.error, error_message=r.message or None, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=b.resource_type,
                     resource_name=b.resource_name, pattern_type=b.pattern_type, principal=b.principal,
                     host=b.host, operation=b.operation, permission_type=b.permission_type)
            for b in r.deleted])
        for r in results])


def _all(filters: list[AclBindingFilter], error: ErrorCode, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=error, error_message=message, matching_acls=[]) for _ in filters])
