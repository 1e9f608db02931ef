"""Handlers with per-kind limits (issue 13) that write when they ran to basic.py's ledger.

`capped` may run 3 at a time across every worker, `metered` may start 60 times a minute, and
`free` has no limit: tests check the limits from the ledger (start and end times taken by the
database's clock) and that `free` drains while the others sit at their limits.
"""

from __future__ import annotations

import time
from typing import Any

from basic import ledger_end, ledger_start

from jobtui.registry import Registry

registry = Registry()


@registry.handler("capped", concurrency=3, backoff_base=0.0, jitter=0.0)
def capped(payload: dict[str, Any]) -> None:
    entry = ledger_start()
    time.sleep(float(payload.get("sleep", 0.15)))
    ledger_end(entry)


@registry.handler("metered", rate="60/m", backoff_base=0.0, jitter=0.0)
def metered(payload: dict[str, Any]) -> None:
    ledger_end(ledger_start())


@registry.handler("free")
async def free(payload: dict[str, Any]) -> None:
    return None
