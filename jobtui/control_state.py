"""What an operator's request (quiet, stop) means for a worker, in one place.

A worker's `workers` row holds the request (`control`, set by jobtui.worker_control) and what
the worker has done about it (`control_applied`, written back by the worker once it has seen
it; migration 0018). The worker itself, the dashboard snapshot (which kinds have a worker),
`jobtui why`, `jobtui stats` and the console's Workers tab all read them and must agree on what
they mean; they read it from here. This module imports nothing of jobtui, so any layer may.
"""

from __future__ import annotations

from typing import Protocol

STOPS_CLAIMING: frozenset[str] = frozenset({"quiet", "stop"})
"""Requests under which a worker claims nothing: `quiet` until it is resumed, `stop` while it
drains and exits. Such a worker is live (it heartbeats, its running jobs finish) but handles no
kind, so it must not count as a worker for a kind: the worker stops claiming on seeing one, and
the dashboard and `why` count it as no worker at all."""


class Controlled(Protocol):
    """A worker row as `control_text` reads it (jobtui.models.WorkerRow is one)."""

    @property
    def control(self) -> str | None: ...

    @property
    def control_applied(self) -> str | None: ...


def control_text(w: Controlled) -> str:
    """What an operator asked of the worker and whether it has acted on it; empty: nothing.

    The request (`control`) is written by the operator, what is done (`control_applied`) by
    the worker once it has seen it; until then the text says "asked"."""
    if w.control_applied == "stop":
        return "stopping"
    if w.control == "stop":
        return "stop asked"
    if w.control == "quiet":
        return "quiet" if w.control_applied == "quiet" else "quiet asked"
    if w.control_applied == "quiet":  # resumed, not yet seen: it still claims nothing
        return "resume asked"
    return ""
