"""The auto engine (spec 04): the pure engine (engine/) and its live lookups (live, the
Arena and 24 h statistics caches)."""
