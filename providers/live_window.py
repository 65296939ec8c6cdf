"""The live window of spec 04 §3.1 source 3: the last 100 completed attempts of each
(provider, model) in this process, for the auto engine's statistics when no 24 h row
has data.

Counting follows 06: a cancelled attempt or a client error (a 4xx that is the
client's fault) is not a sample; any other non-success is a failure; latency
percentiles use successes only; ``good_rate`` = successes / (successes + empty
responses + interrupted streams).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

SIZE = 100
MIN_SAMPLES = 3


@dataclass(frozen=True, slots=True)
class WindowStats:
    samples: int
    failure_rate: float
    p50_ms: float | None
    p95_ms: float | None
    std_ms: float | None
    good_rate: float | None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[index]


class LiveWindow:
    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[str, float | None]]] = {}
        self._lock = threading.Lock()

    def record(self, model_key: str, result: str, latency_ms: float | None) -> None:
        """``result``: success, failure, empty_response or stream_interrupted."""
        with self._lock:
            window = self._samples.get(model_key)
            if window is None:
                window = self._samples[model_key] = deque(maxlen=SIZE)
            window.append((result, latency_ms))

    def stats(self, model_key: str) -> WindowStats | None:
        """None below ``MIN_SAMPLES`` samples."""
        window = self._samples.get(model_key)
        if window is None or len(window) < MIN_SAMPLES:
            return None
        items = list(window)
        successes = [lat for res, lat in items if res == "success" and lat is not None]
        ok = sum(1 for res, _ in items if res == "success")
        failures = len(items) - ok
        bad_output = sum(
            1 for res, _ in items if res in ("empty_response", "stream_interrupted")
        )
        p50 = _percentile(successes, 0.5) if successes else None
        p95 = _percentile(successes, 0.95) if successes else None
        std = None
        if len(successes) >= 2:  # noqa: PLR2004
            mean = sum(successes) / len(successes)
            std = math.sqrt(
                sum((v - mean) ** 2 for v in successes) / (len(successes) - 1)
            )
        good_base = ok + bad_output
        return WindowStats(
            samples=len(items),
            failure_rate=failures / len(items),
            p50_ms=p50,
            p95_ms=p95,
            std_ms=std,
            good_rate=ok / good_base if good_base else None,
        )

    def forget_provider(self, provider: str) -> None:
        """Drop the samples of every model of ``provider`` (admin health reset)."""
        with self._lock:
            for key in [k for k in self._samples if k.startswith(f"{provider}/")]:
                del self._samples[key]

    def reset(self) -> None:
        with self._lock:
            self._samples.clear()


window = LiveWindow()
