"""The handlers the benchmark workers run: `jobtui worker --app benchmarks.bench_app:registry`.

`noop` does nothing (the drain measures the engine, not the handler). `latency` records, at its
first line, how long ago its job was enqueued: the payload carries the producer's `time.time()`
taken just before the enqueue call, and the delay goes to the file named by
JOBTUI_BENCH_LATENCY_FILE (one line per job, appended; both ends run on this machine's clock).
"""

from __future__ import annotations

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
