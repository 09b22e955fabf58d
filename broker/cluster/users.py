"""The SCRAM credentials of a cluster's users, kept in ZooKeeper where Kafka keeps them
(``/config/users/<user>``): every broker follows them (``ZooKeeperCluster.user_credentials``), so a user
created with AlterUserScramCredentials on any broker authenticates on all of them a moment later. The
same reads and changes as the single node's store (``trafka.broker.security.credentials``), with the same
validation."""
from __future__ import annotations

from collections.abc import Sequence

from trafka.broker.cluster.zookeeper import ZooKeeperCluster
from trafka.broker.security.credentials import (
    MECHANISMS_BY_TYPE,
    AlterResult,
    Deletion,
    DescribeResult,
    ScramCredential,
    Upsertion,
    describe_credentials,
    from_salted_password,
    plan_alterations,
)


class ClusterScramCredentials:
    """The cluster's SCRAM credentials, read from this broker's view of ZooKeeper."""

    def __init__(self, cluster: ZooKeeperCluster) -> None:
        self._cluster = cluster

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._cluster.user_credentials.get(user, {}).get(mechanism)

    def exists(self, user: str, mechanism: str) -> bool:
        return self.get(user, mechanism) is not None

    def describe(self, users: Sequence[str] | None = None) -> list[DescribeResult]:
        return describe_credentials(users, self._cluster.user_credentials)

    async def alter(self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]) -> list[AlterResult]:
        """Validate one AlterUserScramCredentials request and write its accepted changes to ZooKeeper."""
        results, to_delete, to_upsert = plan_alterations(list(deletions), list(upsertions), self.exists)
        changes: dict[str, dict[str, ScramCredential]] = {}
        for deletion in to_delete:
            credentials = changes.setdefault(deletion.user, dict(self._cluster.user_credentials.get(deletion.user, {})))
            credentials.pop(MECHANISMS_BY_TYPE[deletion.mechanism], None)
        for upsertion in to_upsert:
            mechanism = MECHANISMS_BY_TYPE[upsertion.mechanism]
            credentials = changes.setdefault(upsertion.user,
                                             dict(self._cluster.user_credentials.get(upsertion.user, {})))
            credentials[mechanism] = from_salted_password(mechanism, upsertion.salt, upsertion.salted_password,
                                                          upsertion.iterations)
        if changes:
            await self._cluster.set_user_credentials(changes)
        return results
