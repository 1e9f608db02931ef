"""`make bench-table` writes the README's figures from results files, never by hand."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import table

RESULTS = {
    "date": "2026-12-01T00:00:00+00:00",
    "command": "python benchmarks/run.py",
    "mode": "full",
    "seconds": 10,
    "machine": {"cores": 2},
    "settings": {"jobtui": {"label": "jobtui", "concurrency": 200}},
    "figures": [
        {
            "metric": "drain",
            "label": "drain 20000 no-op jobs",
            "system": "jobtui",
            "values": [30000.0, 31000.0, 29000.0],
            "median": 30000.0,
            "min": 29000.0,
            "max": 31000.0,
            "digits": 0,
            "unit": "jobs/s",
            "target": "≥ 45 000 jobs/s",
            "met": False,
        }
    ],
}
MATRIX = {
    "date": "2026-12-01T01:00:00+00:00",
    "command": "python benchmarks/run.py --workers 1,2",
    "runs": [
        {"scenario": "drain", "system": "jobtui", "workers": 1, "backlog": 20000, "rate": 15000.0},
        {"scenario": "drain", "system": "jobtui", "workers": 2, "backlog": 20000, "rate": 28000.0},
        {"scenario": "drain", "system": "jobtui", "workers": 2, "backlog": 20000, "rate": 30000.0},
        {"scenario": "drain", "system": "jobtui", "workers": 2, "backlog": 200000, "rate": 26000.0},
        {"scenario": "latency", "system": "jobtui", "workers": 2, "delays_ms": [2.0, 3.0, 9.0]},
    ],
}
HISTORY = {
    "date": "2026-12-01T02:00:00+00:00",
    "command": "python benchmarks/history.py",
    "ready": 20000,
    "dead": 10000,
    "runs": 3,
    "timings_ms": {
        "1000000": {"snapshot": [5.0, 6.0, 7.0]},
        "10000000": {"snapshot": [5.5, 6.5, 70.0]},
    },
}


def _files(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / f"{name}.json" for name in ("results", "matrix", "history")}
    for path, data in zip(paths.values(), (RESULTS, MATRIX, HISTORY), strict=True):
        path.write_text(json.dumps(data))
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n<!-- bench-table:start -->\nold\n<!-- bench-table:end -->\n"
        "text kept\n<!-- bench-growth:start -->\nold\n<!-- bench-growth:end -->\nend\n"
    )
    return {**paths, "readme": readme}


def _rendered_between(f: dict[str, Path], markers: tuple[str, str]) -> str:
    """The page after bench-table, with the main table's markers and these around `old`."""
    start, end = markers
    f["readme"].write_text(f"# x\n{table.START}\n{table.END}\nprose\n{start}\nold\n{end}\nend\n")
    assert table.main([str(f["results"]), "--readme", str(f["readme"])]) == 0
    text = f["readme"].read_text()
    assert "old" not in text and text.endswith(f"{end}\nend\n")
    return text


def test_the_readme_tables_are_written_from_the_results(tmp_path: Path) -> None:
    f = _files(tmp_path)
    argv = [str(f["results"]), "--readme", str(f["readme"])]
    assert table.main([*argv, "--matrix", str(f["matrix"]), "--history", str(f["history"])]) == 0
    text = f["readme"].read_text()
    assert "old" not in text and "text kept" in text and text.endswith("end\n")
    assert "30 000 jobs/s [29 000–31 000] (3) — missed" in text
    # drain by backlog and workers, median [min–max] (runs)
    assert "| 20,000, 1 worker process | 15 000 (1) jobs/s |" in text
    assert "| 20,000, 2 worker processes | 29 000 [28 000–30 000] (2) jobs/s |" in text
    assert "| 200,000, 2 worker processes | 26 000 (1) jobs/s |" in text
    assert "| 2 worker processes | 3.00 (1) | 8.88 (1) |" in text
    # the history: p50 / p95 per size
    assert "| snapshot | 6.0 / 6.9 | 6.5 / 63.6 |" in text  # interpolated, as history.py prints


MATRIX_WITH_PGQUEUER = {
    "date": "2026-12-07T06:00:00+00:00",
    "command": "python benchmarks/run.py --only drain --workers 2 --peers pgqueuer",
    "seconds": 900.0,
    "load": {"before": [2.5, 1.5, 0.6], "after": [3.1, 2.9, 2.0]},
    "runs": [
        {"scenario": "drain", "system": s, "workers": 2, "backlog": b, "rate": rate}
        for s, b, rate in (
            ("jobtui", 20000, 30000.0),
            ("pgqueuer", 20000, 10000.0),
            ("jobtui", 2000000, 15000.0),
            ("pgqueuer", 2000000, 8000.0),
        )
    ]
    + [
        {
            "scenario": "drain",
            "system": "pgqueuer",
            "workers": 4,
            "backlog": 2000000,
            "rate": 1000.0,
            "done": 300000,
            "seconds": 300.0,
        }
    ],
}


def test_the_matrix_shows_pgqueuer_beside_jobtui_and_the_backlog_growth_ratio(
    tmp_path: Path,
) -> None:
    """Issue 24: the 2M drain against the 20k one, PgQueuer measured at the same backlogs."""
    text = "\n".join(table.render_matrix(MATRIX_WITH_PGQUEUER))
    assert "as work grows, jobtui and PgQueuer" in text
    assert "900 s; load average (1 min) 2.50 before and 3.10 after the run" in text
    assert (
        "| drain: ready jobs at release, workers | jobtui | PgQueuer | jobtui ÷ PgQueuer |" in text
    )
    assert "| 20,000, 2 worker processes | 30 000 (1) jobs/s | 10 000 (1) jobs/s | 3.00× |" in text
    assert (
        "| 2,000,000, 2 worker processes | 15 000 (1) jobs/s | 8 000 (1) jobs/s | 1.88× |" in text
    )
    assert (
        "| drain at 2,000,000 ÷ at 20,000 (issue 24: ≥ 0.6× for jobtui) | jobtui | PgQueuer |"
        in text
    )
    assert "| 2 worker processes | 0.50× — missed | 0.80× |" in text
    # a drain stopped at its cap is rated on what it finished, and says so
    capped = "1 000 (1) jobs/s, stopped at 300 s with 300,000 done"
    assert f"| 2,000,000, 4 worker processes |  | {capped} |" in text


def test_a_missing_or_broken_results_file_is_one_line_and_changes_nothing(
    tmp_path: Path, capsys: object
) -> None:
    f = _files(tmp_path)
    before = f["readme"].read_text()
    f["history"].write_text("{not json")
    argv = [str(f["results"]), "--readme", str(f["readme"]), "--history", str(f["history"])]
    assert table.main(argv) == 1
    assert table.main([str(tmp_path / "nope.json"), "--readme", str(f["readme"])]) == 1
    quick = {**RESULTS, "mode": "quick"}
    f["results"].write_text(json.dumps(quick))
    assert table.main([str(f["results"]), "--readme", str(f["readme"])]) == 1
    assert f["readme"].read_text() == before


def test_the_tables_live_in_the_docs_performance_page() -> None:
    """Issue 27: the README became a front page; the generated tables moved to the docs."""
    assert Path(table.ROOT) / "docs" / "performance.md" == table.PAGE
    text = table.PAGE.read_text()
    for start, end in (
        (table.START, table.END),
        table.GROWTH,
        table.WRITE_COST_MARKERS,
        table.FLOOR_MARKERS,
    ):
        assert text.count(start) == 1 and text.count(end) == 1
    assert f"]({table.PLOT_LINK})" in text
    assert (table.PAGE.parent / table.PLOT_LINK).resolve() == (table.ROOT / table.PLOT).resolve()
    readme = (Path(table.ROOT) / "README.md").read_text()
    assert table.START not in readme and table.GROWTH[0] not in readme


def test_a_recorded_write_cost_run_is_rendered_between_its_markers(tmp_path: Path) -> None:
    """`write_cost --record` keeps its run in the results; bench-table writes its table."""
    import argparse

    from benchmarks import write_cost

    f = _files(tmp_path)
    per_job = {
        v: {w: [20.0 * (i + 1) + r for r in (0, 1, 2)] for w in write_cost.WRITES}
        for i, v in enumerate(write_cost.VARIANTS)
    }
    args = argparse.Namespace(in_server=True, rounds=3, jobs=4000, block=200)
    command = "python -m benchmarks.write_cost --in-server --rounds 3 --record x.json"
    run = write_cost.entry(
        per_job,
        args,
        command,
        {"before": [1.5, 1, 1], "after": [2.25, 1, 1]},
        {"cores": 2, "cpu_model": "AMD EPYC", "postgresql": "15.20", "python": "3.11"},
    )
    write_cost.record(f["results"], run)
    kept = json.loads(f["results"].read_text())
    assert kept["figures"] == RESULTS["figures"] and kept[table.WRITE_COST] == run
    start, _ = table.WRITE_COST_MARKERS
    text = _rendered_between(f, table.WRITE_COST_MARKERS)
    section = text.split(start, 1)[1]
    lines = section.splitlines()
    head = "| µs per job (ratio to the article's) | insert + notify | claim one | complete one |"
    assert lines[1] == head
    assert lines[3] == "| article | " + " | ".join(["21 [20–22] (3) µs, 1.00×"] * 3) + " |"
    assert lines[4] == (
        f"| {write_cost.VARIANTS[1]} | " + " | ".join(["41 [40–42] (3) µs, 1.95×"] * 3) + " |"
    )
    assert len([line for line in lines if line.startswith("| jobtui")]) == 7
    assert f"with `{command}`: 3 rounds of 4,000 jobs per variant in blocks of 200" in section
    assert "timed inside the server; 2 cores (AMD EPYC), PostgreSQL 15.20" in section
    assert "load average (1 min) 1.50 before and 2.25 after the run." in section


def test_a_page_without_the_write_cost_markers_is_refused_when_there_is_a_run(
    tmp_path: Path,
) -> None:
    f = _files(tmp_path)
    before = f["readme"].read_text()
    f["results"].write_text(
        json.dumps({**RESULTS, table.WRITE_COST: {"writes": [], "variants": []}})
    )
    assert table.main([str(f["results"]), "--readme", str(f["readme"])]) == 1
    assert f["readme"].read_text() == before


def test_a_scenario_run_keeps_the_write_cost_entry_recorded_beside_it(tmp_path: Path) -> None:
    """`make bench` rewrites results.json; the entry `write_cost.py --record` put there stays."""
    from benchmarks import run

    path = tmp_path / "results.json"
    path.write_text(json.dumps({**RESULTS, "write_cost": {"variants": []}}))
    run.write_results(path, dict(RESULTS))
    assert json.loads(path.read_text())["write_cost"] == {"variants": []}


def test_the_targets_against_their_floors_are_rendered_between_their_markers(
    tmp_path: Path,
) -> None:
    """`floor_targets --record` keeps one run of issue 24's targets beside the article's floors;
    bench-table writes floor, jobtui, ratio and met/missed for each target."""
    from benchmarks import floor_targets

    f = _files(tmp_path)
    targets = [
        floor_targets.target(
            "pickup p50", "bare LISTEN consumer", "ms", 2, [2.0, 2.5, 3.0], [2.2, 3.5, 3.0],
            "≤", 1.2,
        ),
        floor_targets.target(
            "drain", "bare loop", "jobs/s", 0, [40000.0, 50000.0, 45000.0],
            [30000.0, 40000.0, 45000.0], "≥", 0.9,
        ),
    ]  # fmt: skip
    assert [t["met"] for t in targets] == [True, False]
    command = "python -m benchmarks.floor_targets --rounds 3 --record x.json"
    run = floor_targets.entry(
        targets,
        command,
        3,
        {"before": [1.5, 1, 1], "after": [2.25, 1, 1]},
        {"cores": 2, "cpu_model": "AMD EPYC", "postgresql": "15.20"},
    )
    floor_targets.record(f["results"], run)
    kept = json.loads(f["results"].read_text())
    assert kept["figures"] == RESULTS["figures"] and kept[table.FLOOR_TARGETS] == run
    start, _ = table.FLOOR_MARKERS
    text = _rendered_between(f, table.FLOOR_MARKERS)
    lines = text.split(start, 1)[1].splitlines()
    assert lines[3] == (
        "| pickup p50 ≤ 1.2× | bare LISTEN consumer | 2.50 [2.00–3.00] (3) ms "
        "| 3.00 [2.20–3.50] (3) ms | 1.10 [1.00–1.40] (3)× | met |"
    )
    assert lines[4] == (
        "| drain ≥ 0.9× | bare loop | 45 000 [40 000–50 000] (3) jobs/s "
        "| 40 000 [30 000–45 000] (3) jobs/s | 0.80 [0.75–1.00] (3)× | missed |"
    )
    assert f"with `{command}`: 3 rounds" in text
    assert "load average (1 min) 1.50 before and 2.25 after the run." in text
    # `make bench` rewrites the results; the recorded entry stays.
    from benchmarks import run as bench_run

    bench_run.write_results(f["results"], dict(RESULTS))
    assert json.loads(f["results"].read_text())[table.FLOOR_TARGETS] == run
