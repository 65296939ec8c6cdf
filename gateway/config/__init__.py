"""The routing table: the snapshot built from the database, the per-process holder that
swaps it when the config revision changes, and the refreshed caches."""
