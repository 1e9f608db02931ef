"""`make bench-matrix` measures PgQueuer beside jobtui at every backlog (issue 24's backlog
growth target is set against it), in one command."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmarks import run
from benchmarks.common import Bench
from benchmarks.systems import runnable

ROOT = Path(__file__).resolve().parent.parent


def matrix_recipe() -> str:
    text = (ROOT / "Makefile").read_text()
    match = re.search(r"^bench-matrix:.*?\n((?:\t.*\n)+)", text, re.M)
    assert match, "Makefile: no bench-matrix target"
    return match.group(1)


def test_the_matrix_target_runs_pgqueuer_not_no_peers() -> None:
    recipe = matrix_recipe()
    assert "--no-peers" not in recipe
    assert "--peers $(MATRIX_PEERS)" in recipe
    assert re.search(r"^MATRIX_PEERS\s*\?=\s*pgqueuer$", (ROOT / "Makefile").read_text(), re.M)


def test_peers_chooses_which_peers_run_beside_jobtui() -> None:
    pytest.importorskip("pgqueuer")
    args = run.parse_args(["--only", "drain", "--peers", "pgqueuer"], ["drain"])
    bench = Bench(admin_dsn="", quick=True, runs=1, origin="", peer_names=args.peers)
    try:
        assert [s.name for s in runnable(bench)] == ["jobtui", "pgqueuer"]
        assert not bench.failures
    finally:
        bench.cleanup()
        shutil.rmtree(bench.tmp, ignore_errors=True)
    with pytest.raises(SystemExit):
        run.parse_args(["--peers", "pgqueuer", "--no-peers"], ["drain"])
    with pytest.raises(SystemExit):
        run.parse_args(["--peers", "nosuchqueue"], ["drain"])
