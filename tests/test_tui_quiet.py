"""The idle console is quiet over a slow link: bytes it writes to a real terminal (tmux).

A short form of `benchmarks/console_tmux.py` (make bench-console): the real console runs in a
tmux pane at 80×24 on a database where nothing changes, each tab is opened in turn, and the
bytes tmux's `pipe-pane` copies out while no key is pressed give B/s. Before issue 11 the tabs
wrote 2–9 KB/s (a table's scrollbars re-sent on every status-line tick, whole tables repainted
when one age changed); the limit is the issue's target.
"""

from __future__ import annotations

import shutil
import statistics

import pytest

from benchmarks.bigdata import build
from benchmarks.common import ScenarioSkipped
from benchmarks.console_tmux import IDLE_TARGET, TABS, measure

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def test_idle_console_writes_less_than_500_bytes_a_second_on_every_tab(dsn: str) -> None:
    build(dsn, 3000, 400, 400)  # finished, ready and dead rows of ten kinds, an hour old
    try:
        got = measure(dsn, 80, 24, tabs="".join(TABS), startup=6, settle=3, window=4, windows=3)
    except ScenarioSkipped as exc:
        pytest.fail(f"the console did not run in tmux: {exc}")
    assert [r.tab for r in got] == list(TABS.values())
    # The median window: once a minute the sparklines and the minute-rounded ages move on
    # (a few KB at once); the target is about the steady idle rate, and the median of three
    # windows leaves that one burst out while any steady noise stays in.
    rates = {r.tab: statistics.median(r.rates) for r in got}
    # 0 B/s is a right answer now: a fresh status line says "live" and stays still. What
    # makes this test fail is a tab that gets loud again (each one was 2-9 KB/s before).
    loud = {tab: round(rate) for tab, rate in rates.items() if rate > IDLE_TARGET}
    assert loud == {}, f"B/s over {IDLE_TARGET:.0f} at 80x24 while idle: {loud} (all: {rates})"
