"""One request, wire-neutral: the chain, the slot loop, THE attempt runner, the
upstream I/O, the stream relay, the report and the run's record."""
