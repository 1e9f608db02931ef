"""When CPython's cycle collector walks the whole heap: while the operator is not waiting.

A full (oldest-generation) collection walks every object the collector tracks, and a console
at issue 15's scale tracks 150,000-200,000: most are Textual's drawn lines (a `Strip` keeps
itself in its own caches, so each line drawn is freed by the collector, never by its reference
count alone). On a 2-core box one full collection took 90-230 ms, and with the default
thresholds one fell inside every fourth or fifth key press: it was the p95 of every key in
benchmarks/console_scale.py (`--each` shows the rounds, the `gc` column the time in it).

So, from the first refresh drawn until the console closes (`release` undoes all of it):

- what start-up built (modules, classes, CSS, every tab's widgets: ~90,000 objects that live as
  long as the console) is frozen (`gc.freeze`): no later collection walks it. Its garbage is
  frozen with it (a few thousand objects, collectable again after `release`): freezing costs
  nothing, a collection first would cost the operator's first key up to 100 ms;
- the middle generation is collected every 50 young collections instead of 10 (every ~35,000
  allocations: two or three key presses at scale), so the lines of a screen that is replaced
  mostly die there instead of in the oldest generation, and the oldest is collected on its own
  only after 100 of those (instead of 10): a backstop for a console never left alone;
- instead, a full collection runs once no key, click or wheel came for QUIET_S, at most every
  MIN_INTERVAL_S, and only when something reached the oldest generation since the last one.

The thresholds stay as they are on CPython 3.14 and later, whose incremental collector has no
long pauses and reads them differently. One console per process: `release` unfreezes it all.
"""

from __future__ import annotations

import gc
import sys
import time

QUIET_S = 1.0  # no key, click or wheel for this long: nobody is waiting for the screen
MIN_INTERVAL_S = 15.0  # full collections at most this often (50-100 ms each: under 1% of a CPU)
MIDDLE_EVERY = 50  # young collections per middle one (CPython's default: 10)
OLDEST_EVERY = 100  # middle collections per automatic full one (default: 10)
TUNES_THRESHOLDS = sys.implementation.name == "cpython" and sys.version_info < (3, 14)


class Collector:
    """The console's schedule for the cycle collector; the app calls `settle` once its first
    data is drawn, `input_seen` on every key, click and wheel, `tick` every QUIET_S, `release`
    at exit."""

    def __init__(self, *, quiet_s: float = QUIET_S, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.quiet_s = quiet_s
        self.min_interval_s = min_interval_s
        self.settled = False
        self.released = False  # the console is closing: `settle` comes too late
        self.full_collections = 0  # run by `tick`, while nobody was waiting
        self._thresholds: tuple[int, int, int] | None = None  # the process's, to put back
        self._last_input = time.monotonic()
        self._last_full = time.monotonic()

    def settle(self) -> None:
        """Freeze what start-up built and move full collections out of the operator's way."""
        if self.settled or self.released:
            return
        self.settled = True
        gc.freeze()
        if TUNES_THRESHOLDS:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(self._thresholds[0], MIDDLE_EVERY, OLDEST_EVERY)
        self._last_full = time.monotonic()

    def input_seen(self) -> None:
        """A key, a click or the wheel: no full collection for the next QUIET_S."""
        self._last_input = time.monotonic()

    def tick(self) -> bool:
        """A full collection now if nobody is waiting and one is due; whether it ran."""
        now = time.monotonic()
        if (
            not self.settled
            or now - self._last_input < self.quiet_s
            or now - self._last_full < self.min_interval_s
            or gc.get_count()[2] == 0  # no middle collection since the last full one
        ):
            return False
        gc.collect()
        self._last_full = time.monotonic()
        self.full_collections += 1
        return True

    def release(self) -> None:
        """The process's collector as it was before `settle`; no `settle` after this."""
        self.released = True
        if not self.settled:
            return
        self.settled = False
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()
