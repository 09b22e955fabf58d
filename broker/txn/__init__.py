"""Transactions: the coordinator, its log records and the markers it writes."""
