"""Request handlers, one module per API. Importing this package registers all of them."""
from broker.handlers.registry import REGISTRY, RequestContext, handles

from broker.handlers import (  # noqa: E402,F401  (imported for their registrations)
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    init_producer_id,
)

__all__ = ["REGISTRY", "RequestContext", "handles"]
