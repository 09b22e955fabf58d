"""Replication, the follower's side: copying the leader's record batches into this broker's logs.

- ``fetcher``: the replica fetcher, one Trio task per source broker (Kafka's ReplicaFetcherThread and
  AbstractFetcherThread). It long-polls the leader with Fetch for every partition this broker follows
  there, appends the batches exactly as the leader wrote them, takes the leader's high watermark and
  log start offset, and truncates where its log diverges from the leader's.

Which partitions are followed, from which broker and under which leader epoch is decided elsewhere
(the replica manager); this package takes the narrow things it needs, a partition's log and its epoch.
The connection to the leader is the broker-to-broker one, :mod:`trafka.broker.peer`, which the transaction
machinery uses too.
"""
