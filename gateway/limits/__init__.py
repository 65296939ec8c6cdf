"""Per-key rate limits and budgets (spec 08 §6): admission, the in-process store and
the Redis script."""
