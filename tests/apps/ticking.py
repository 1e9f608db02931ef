"""A schedule that ticks every second (six-field cron), for the exactly-once tests."""

from __future__ import annotations

from typing import Any

from jobtui.registry import Registry

registry = Registry()


@registry.periodic("* * * * * *", name="every_second")
@registry.handler("tick")
async def tick(payload: dict[str, Any]) -> None:
    return None
