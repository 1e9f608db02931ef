"""Issue 26 item 13: `jobtui demo` as shipped, at 80x24, sends at most 1 KB/s on the tabs the
issue measured (2-4 KB/s before), measured as the issue did: through tmux `pipe-pane`.

The full table (every tab, 20 s windows, idle and live) is printed by
`python benchmarks/console_tmux.py --idle-and-demo --sizes 80x24 --window 20 --windows 1`.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pytest

from benchmarks.common import ScenarioSkipped
from benchmarks.console_tmux import measure

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

LIVE_TARGET = 1024.0  # B/s


def test_live_demo_is_quiet_on_overview_jobs_and_dead_letters(tmp_path: Path) -> None:
    try:
        got = measure(
            "", 80, 24, tabs="123", startup=15, settle=3, window=5, windows=3, demo=True,
            workdir=tmp_path,
        )  # fmt: skip
    except ScenarioSkipped as exc:
        pytest.fail(f"the demo did not run in tmux: {exc}")
    rates = {r.tab: statistics.median(r.rates) for r in got}
    loud = {tab: round(rate) for tab, rate in rates.items() if rate > LIVE_TARGET}
    assert loud == {}, f"B/s over {LIVE_TARGET:.0f} at 80x24 under jobtui demo: {rates}"
