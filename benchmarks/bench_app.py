"""The handlers the benchmark workers run: `jobtui worker --app benchmarks.bench_app:registry`.

`noop` does nothing (the drain measures the engine, not the handler); `capped5` is limited to 5
at once (benchmarks/limits_drain.py). `latency` records, at its
first line, how long ago its job was enqueued: the payload carries the producer's `time.time()`
taken just before the enqueue call, and the delay goes to the file named by
JOBTUI_BENCH_LATENCY_FILE (one line per job, appended; both ends run on this machine's clock).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from jobtui.registry import Registry

registry = Registry()


def record_latency(sent_at: float, now: float) -> None:
    path = os.environ.get("JOBTUI_BENCH_LATENCY_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{now - sent_at:.6f}\n")


def _payload(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The job's payload, whatever shape the handler is called with."""
    if "payload" in kwargs:
        return kwargs["payload"]
    for arg in args:
        if isinstance(arg, dict):
            return arg
        payload = getattr(arg, "payload", None)
        if isinstance(payload, dict):
            return payload
    return {}


@registry.handler("noop")
async def noop(*args: Any, **kwargs: Any) -> None:
    """A job that does nothing."""


@registry.handler("latency")
async def latency(*args: Any, **kwargs: Any) -> None:
    """Record enqueue → handler start."""
    now = time.time()
    record_latency(float(_payload(args, kwargs).get("t", now)), now)


# `--app benchmarks.bench_app:limited_registry`: `noop`, and `capped5` limited to 5 running at
# once across every worker. Apart from `registry`, so the plain drain declares no limit.
limited_registry = Registry()
limited_registry.handler("noop")(noop)


@limited_registry.handler("capped5", concurrency=5)
async def capped5(*args: Any, **kwargs: Any) -> None:
    """A kind limited to 5 running at once across every worker (benchmarks/limits_drain.py):
    each job holds its slot for `ms` milliseconds of its payload (default 10)."""
    await asyncio.sleep(float(_payload(args, kwargs).get("ms", 10)) / 1000)
