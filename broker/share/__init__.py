"""Share groups (KIP-932): the share coordinator, its state records and the persister share partitions use."""
