"""Consumer groups: the group coordinator, the classic and KIP-848 consumer protocols, and committed offsets."""
