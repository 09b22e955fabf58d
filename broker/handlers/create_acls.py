"""CreateAcls (key 30), versions 1-3 (Kafka 4 serves no v0).

Creates ACL bindings in the broker's ACL store (``trafka.broker.security.acls``; ZooKeeper in a cluster),
as Kafka does: the principal needs ALTER on the cluster (else every creation is answered
CLUSTER_AUTHORIZATION_FAILED); without an authorizer every creation is answered SECURITY_DISABLED. Each
creation is judged alone: INVALID_REQUEST with Kafka's message for a CLUSTER resource not named
``kafka-cluster``, an empty resource name or host, a code Kafka does not know (read as UNKNOWN), a principal
not of the form ``Type:name``; a valid binding is created (or was there already) and answered with no
error. A creation with an ANY or MATCH (which name no binding) fails the whole request with
UNKNOWN_SERVER_ERROR and creates nothing, as in Kafka; one with a code of 0 (UNKNOWN) is a request Kafka
cannot read: the connection is closed, as Kafka closes it.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import CloseConnection, RequestContext, handles
from trafka.broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
    operation,
    pattern_type,
    permission_type,
    resource_type,
)
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import CreateAclsRequest, CreateAclsResponse
from trafka.wire.protocol import ApiKey

Result = CreateAclsResponse.AclCreationResult


def creation_binding(creation: CreateAclsRequest.AclCreation) -> AclBinding:
    return AclBinding(resource_type(creation.resource_type), creation.resource_name,
                      pattern_type(creation.resource_pattern_type), creation.principal, creation.host,
                      operation(creation.operation), permission_type(creation.permission_type))


def _unknown(creation: CreateAclsRequest.AclCreation) -> bool:
    """A code of UNKNOWN (0): a request Kafka cannot read. (A code it does not know reads as UNKNOWN later,
    and is refused with that name.)"""
    return not (creation.resource_type and creation.resource_pattern_type and creation.operation
                and creation.permission_type)


def _filter_values(binding: AclBinding) -> bool:
    """An ANY or MATCH where a binding needs a value: Kafka cannot make a binding of it, and fails the whole
    request with UNKNOWN_SERVER_ERROR."""
    return (binding.resource_type == AclResourceType.ANY
            or binding.pattern_type in (PatternType.ANY, PatternType.MATCH)
            or binding.operation == AclOperation.ANY or binding.permission_type == AclPermissionType.ANY)


@handles(ApiKey.CREATE_ACLS, 1, 3)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    if any(_unknown(creation) for creation in request.creations):
        raise CloseConnection("CreateAcls with UNKNOWN elements")
    bindings = [creation_binding(creation) for creation in request.creations]
    broker = ctx.broker
    if broker.authorizer is None or broker.acls is None:
        return _all(bindings, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    refusal = ctx.cluster_refusal(AclOperation.ALTER)
    if refusal is not None:
        return _all(bindings, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, refusal)
    if any(_filter_values(binding) for binding in bindings):
        return _all(bindings, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    results = await broker.acls.create(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=r.error, error_message=r.message) for r in results])


def _all(bindings: list[AclBinding], error: ErrorCode, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0,
                              results=[Result(error_code=error, error_message=message) for _ in bindings])
