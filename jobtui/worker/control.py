"""What operators ask of this worker through its `workers` row: quiet, resume, stop.

The request is set by jobtui.worker_control and announced by a `control:<worker id>` NOTIFY;
the listener wakes the liveness task, which calls `check()` at once, and liveness also calls
it after every heartbeat, so a worker that hears no NOTIFY still acts within one heartbeat
interval. Quiet stops claiming (the dispatcher sees it through `fenced`) while running jobs
finish and heartbeats go on; resume claims again; stop runs the same drain as SIGTERM. What the
worker did is written back (`control_applied`), so the console shows "quiet" only once it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from jobtui.control_state import STOPS_CLAIMING
from jobtui.sql import queries
from jobtui.worker.link import Link

log = logging.getLogger("jobtui.worker")


class Control:
    """This worker's view of the operator's request, and its reaction to changes."""

    def __init__(
        self,
        schema: str,
        worker_id: str,
        on_resume: Callable[[], None],
        on_stop: Callable[[], None],
    ) -> None:
        self.q = queries(schema)
        self.worker_id = worker_id
        self.on_resume = on_resume
        self.on_stop = on_stop
        self.quiet = False  # claim nothing (quiet or stop asked)
        self.stopping = False
        self._applied: str | None = None

    async def check(self, link: Link) -> None:
        """Read the request on this worker's row and act on any change."""
        rows = await link.fetch(self.q.control_read, {"worker": self.worker_id})
        asked = rows[0][0] if rows else None
        if asked == "stop" and not self.stopping:
            self.stopping = True
            log.info(
                "worker=%s event=stop_asked reason=an operator asked it to stop", self.worker_id
            )
            self.on_stop()
        quiet = asked in STOPS_CLAIMING or self.stopping
        if quiet != self.quiet:
            self.quiet = quiet
            if quiet:
                log.info("worker=%s event=quiet claiming=no", self.worker_id)
            else:
                log.info("worker=%s event=resumed claiming=yes", self.worker_id)
                self.on_resume()
        applied = "stop" if self.stopping else asked
        if applied != self._applied:
            await link.fetch(self.q.control_applied, {"worker": self.worker_id, "applied": applied})
            self._applied = applied
