"""Run-time histogram buckets shared by the worker (which fills them) and metrics (which reads).

Per-minute, per-kind figures are kept as counts in fixed buckets so that percentiles over any
window are a sum of arrays, not a scan of finished jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

# Upper bounds in milliseconds; a run time lands in the first bucket whose bound it does not
# exceed, and anything slower in the final open-ended bucket.
BUCKETS_MS: tuple[float, ...] = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
)
N_BUCKETS = len(BUCKETS_MS) + 1


def bucket_index(ms: float) -> int:
    """The bucket a run time of `ms` milliseconds counts in."""
    for i, bound in enumerate(BUCKETS_MS):
        if ms <= bound:
            return i
    return len(BUCKETS_MS)


def merge(into: list[int], other: Sequence[int]) -> list[int]:
    """Add histogram `other` into `into` (growing it if needed); returns `into`."""
    if len(into) < len(other):
        into.extend([0] * (len(other) - len(into)))
    for i, n in enumerate(other):
        into[i] += n
    return into


def percentile(hist: Sequence[int], q: float) -> float | None:
    """The q-quantile (0..1) in ms, interpolated inside its bucket; None when empty."""
    total = sum(hist)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(hist):
        if n and seen + n >= rank:
            lower = 0.0 if i == 0 else BUCKETS_MS[i - 1]
            upper = BUCKETS_MS[i] if i < len(BUCKETS_MS) else BUCKETS_MS[-1] * 2
            return lower + (upper - lower) * ((rank - seen) / n)
        seen += n
    return BUCKETS_MS[-1] * 2
