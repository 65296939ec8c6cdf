"""The peak-EWMA latency estimates of this process (spec 05 §3.2), fed by every
attempt (``gateway.pipeline.health``) and read by the ``adaptive`` strategy."""

from __future__ import annotations

from gateway.kernel.adaptive import LatencyEstimator

latency = LatencyEstimator()
