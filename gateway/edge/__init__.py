"""The front door: the ASGI app of the client wires' paths, API-key authentication, the
drain, the process lifecycle, the run's persistence and the live feed."""
