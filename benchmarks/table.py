"""Write the docs' performance tables from a results JSON (`make bench-table`).

    python benchmarks/table.py benchmarks/results.json            # rewrite docs/performance.md
    python benchmarks/table.py benchmarks/results.json --print    # print it instead
    python benchmarks/table.py results.json --page other.md --allow-quick

The table goes between `<!-- bench-table:start -->` and `<!-- bench-table:end -->`: the run's
date, command, machine, server version and each system's settings, then one row per figure with
median [min–max] (n) for every system, and the scaling plot when benchmarks/scaling.png exists.
With `--matrix` (`make bench-matrix`'s JSON) and/or `--history` (`make bench-history`'s), the
growth tables go between `<!-- bench-growth:start -->` and `<!-- bench-growth:end -->`: drain
by worker processes and backlog, pickup by worker processes, the console's reads by finished
jobs kept.
With a `write_cost` entry in the results (`python -m benchmarks.write_cost --record`), its table
goes between `<!-- write-cost:start -->` and `<!-- write-cost:end -->`: µs per job of each of a
job's writes by schema variant, with the ratio to the article's, and the command that measured it.
With a `floor_targets` entry (`python -m benchmarks.floor_targets --record`), issue 24's targets
against their floors on the article's table go between `<!-- floors:start -->` and
`<!-- floors:end -->`: the floor's figure, jobtui's, the ratio and met/missed for each target.
Nobody types these figures: a run writes the JSON (benchmarks/run.py), this writes the table.
A quick (smoke) run's results are refused unless --allow-quick: they are not figures to publish.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks.common import percentile  # noqa: E402

START, END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"
GROWTH = ("<!-- bench-growth:start -->", "<!-- bench-growth:end -->")
WRITE_COST = "write_cost"  # the results' key benchmarks/write_cost.py --record writes
WRITE_COST_MARKERS = ("<!-- write-cost:start -->", "<!-- write-cost:end -->")
FLOOR_TARGETS = "floor_targets"  # the results' key benchmarks/floor_targets.py --record writes
FLOOR_MARKERS = ("<!-- floors:start -->", "<!-- floors:end -->")
COLUMNS = (("jobtui", "jobtui"), ("pgqueuer", "PgQueuer"), ("procrastinate", "procrastinate"))
PLOT = "benchmarks/scaling.png"
PAGE = ROOT / "docs" / "performance.md"
PLOT_LINK = "img/scaling.png"  # from docs/performance.md (docs/img/scaling.png links to PLOT)


class TableError(Exception):
    """The results or the page cannot make a table; the message says why."""


def fmt(value: float, digits: int) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:.{digits}f}"


def cell(fig: dict[str, Any], with_unit: bool = True) -> str:
    """median [min–max] (runs), the unit after the median, and met/missed for a target."""
    values = fig.get("values") or []
    if not values:
        return f"not measured: {fig['note']}" if fig.get("note") else "not measured"
    digits = int(fig.get("digits", 1))
    raw_unit = str(fig.get("unit") or "")
    unit = "" if not with_unit or not raw_unit else raw_unit if raw_unit == "×" else f" {raw_unit}"
    text = f"{fmt(fig['median'], digits)}{unit}"
    if len(values) > 1:
        text += f" [{fmt(fig['min'], digits)}–{fmt(fig['max'], digits)}]"
    text += f" ({len(values)})"
    if fig.get("met") is not None:
        text += " — met" if fig["met"] else " — missed"
    return text


def row_label(fig: dict[str, Any], labels: dict[str, str]) -> str:
    """The figure's label without the trailing `: <system label>`."""
    label = str(fig["label"]).strip()
    suffix = labels.get(fig.get("system", ""), "")
    if suffix and label.endswith(f": {suffix}"):
        return label[: -len(suffix) - 2]
    return label


def build_rows(results: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(row label, target, cells by system) in the order the figures were measured."""
    labels = {name: s.get("label", name) for name, s in results.get("settings", {}).items()}
    rows: dict[str, tuple[str, str, dict[str, str]]] = {}
    for fig in results.get("figures", []):
        metric = str(fig.get("metric") or fig["label"])
        system = str(fig.get("system") or "jobtui")
        if metric.endswith(":ratio"):
            # jobtui ÷ peer goes beside the peer's own figure.
            base = rows.get(metric[: -len(":ratio")])
            if base:
                ratio = f"jobtui ÷ {dict(COLUMNS).get(system, system)} {cell(fig)}"
                base[2][system] = f"{base[2].get(system, '')}; {ratio}".lstrip("; ")
            continue
        if metric.startswith("console_tmux:"):
            # One row per mode and size; the tabs side by side in the jobtui cell.
            _, mode, size, tab = metric.split(":", 3)
            key = f"console_tmux:{mode}:{size}"
            what = {
                "idle": "idle",
                "live": "live (a worker, a trickle of no-op jobs)",
                "demo": "live demo (`jobtui demo` as shipped)",
            }.get(mode, mode)
            label = f"console output through tmux, {what}, {size}, 2 s refresh"
            windows, _, measured = str(fig.get("note", "")).partition("; ")
            if measured:  # recorded by console_tmux.py --record: its windows, command, date
                label += f", {windows} windows: {measured}"
            entry = rows.setdefault(key, (label, fig.get("target", ""), {}))
            entry[2]["jobtui"] = (entry[2].get("jobtui", "") + f"; {tab} {cell(fig)}").lstrip("; ")
            continue
        entry = rows.setdefault(metric, (row_label(fig, labels), "", {}))
        if system == "jobtui" and fig.get("target"):
            entry = rows[metric] = (entry[0], str(fig["target"]), entry[2])
        entry[2][system] = cell(fig)
    return list(rows.values())


def md_row(cells: list[str]) -> str:
    """A markdown table row, a `|` inside a cell escaped."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(results: dict[str, Any], plot_exists: bool) -> str:
    machine = results.get("machine", {})
    lines = [
        f"Generated by `make bench-table` from `benchmarks/results.json`: measured "
        f"{results.get('date', '?')} with `{results.get('command', '?')}` "
        f"({results.get('mode', '?')} run, {results.get('seconds', 0):.0f} s).",
        "",
        f"- Machine: {machine.get('cores', '?')} cores ({machine.get('cpu_model', '?')}), "
        f"PostgreSQL {machine.get('postgresql', '?')} ({machine.get('postgresql_source', '?')}, "
        f"synchronous_commit {machine.get('synchronous_commit', '?')}), Python "
        f"{machine.get('python', '?')}.",
    ]
    for name, settings in results.get("settings", {}).items():
        shown = ", ".join(
            f"{k} {'unset' if v is None else v}"
            for k, v in settings.items()
            if k not in ("label", "source")
        )
        source = f" — {settings['source']}" if settings.get("source") else ""
        lines.append(f"- {settings.get('label', name)}: {shown}{source}.")
    lines += [
        "- Each cell: median [min–max] (runs); drain and pickup runs are interleaved rounds "
        "whose order rotates.",
        "",
        "| figure | target | " + " | ".join(title for _, title in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for label, target, cells in build_rows(results):
        row = [label, target, *(cells.get(name, "") for name, _ in COLUMNS)]
        lines.append(md_row(row))
    for failure in results.get("failures", []):
        lines.append(f"\nFailed in this run: {failure}")
    if plot_exists:
        lines += ["", f"![Drain and pickup as workers and backlog grow]({PLOT_LINK})"]
    return "\n".join(lines)


def spread_cell(values: list[float], digits: int) -> str:
    """median [min–max] (n) of raw values, as `cell` writes a figure."""
    text = fmt(statistics.median(values), digits)
    if len(values) > 1:
        text += f" [{fmt(min(values), digits)}–{fmt(max(values), digits)}]"
    return f"{text} ({len(values)})"


def grid(corner: str, rows: dict[str, dict[str, str]]) -> list[str]:
    """A markdown table: one line per row key (in insertion order), columns as first seen."""
    columns = list(dict.fromkeys(c for cells in rows.values() for c in cells))
    lines = [f"| {corner} | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for key, cells in rows.items():
        lines.append(f"| {key} | " + " | ".join(cells.get(c, "") for c in columns) + " |")
    return [*lines, ""]


# Issue 24's "backlog growth" target: the drain at the largest backlog over the smallest.
GROWTH_TARGET = (20_000, 2_000_000, 0.6)


def workers_text(n: int) -> str:
    return f"{n} worker process{'es' if n > 1 else ''}"


def render_matrix(matrix: dict[str, Any]) -> list[str]:
    """`make bench-matrix`'s runs: drain jobs/s per (backlog, workers) for each system with
    jobtui ÷ peer, the largest backlog's drain over the smallest's (issue 24), and pickup
    p50/p99 per workers. Ratios are of medians."""
    titles = dict(COLUMNS)
    drain: dict[tuple[int, int], dict[str, list[float]]] = {}
    capped: dict[tuple[int, int, str], list[str]] = {}  # a drain stopped at its cap says so
    pickup: dict[str, dict[str, list[float]]] = {}
    for r in matrix.get("runs", []):
        system = str(r.get("system", "jobtui"))
        if r.get("scenario") == "drain":
            cell_ = drain.setdefault((int(r["backlog"]), int(r["workers"])), {})
            cell_.setdefault(system, []).append(r["rate"])
            if "done" in r and r["done"] < r["backlog"]:
                capped.setdefault((int(r["backlog"]), int(r["workers"]), system), []).append(
                    f"stopped at {r['seconds']:.0f} s with {r['done']:,} done"
                )
        elif r.get("scenario") == "latency" and r.get("delays_ms"):
            cells = pickup.setdefault(workers_text(int(r["workers"])), {})
            name = titles.get(system, system)
            cells.setdefault(f"{name} p50 ms", []).append(percentile(r["delays_ms"], 50))
            cells.setdefault(f"{name} p99 ms", []).append(percentile(r["delays_ms"], 99))
    systems = [s for s, _ in COLUMNS if any(s in c for c in drain.values())]
    systems += sorted({s for c in drain.values() for s in c} - set(systems))
    shown = " and ".join(titles.get(s, s) for s in systems) or "jobtui"
    load = matrix.get("load", {})
    loads = " and ".join(f"{load[k][0]:.2f} {k}" for k in ("before", "after") if load.get(k))
    took = f"{matrix['seconds']:.0f} s" if "seconds" in matrix else "time not recorded"
    took += f"; load average (1 min) {loads} the run" if loads else ""
    lines = [
        f"Drain and pickup as work grows, {shown}: measured {matrix.get('date', '?')} with "
        f"`{matrix.get('command', '?')}` ({took}); each cell median [min–max] (runs), ratios of "
        "medians.",
        "",
    ]
    if drain:
        rows: dict[str, dict[str, str]] = {}
        for (backlog, workers), by_system in sorted(drain.items()):
            cells = {
                titles.get(s, s): spread_cell(by_system[s], 0)
                + " jobs/s"
                + "".join(f", {c}" for c in capped.get((backlog, workers, s), []))
                for s in systems
                if s in by_system
            }
            for peer in systems[1:] if "jobtui" in by_system else []:
                if peer in by_system:
                    ratio = statistics.median(by_system["jobtui"]) / statistics.median(
                        by_system[peer]
                    )
                    cells[f"jobtui ÷ {titles.get(peer, peer)}"] = f"{ratio:.2f}×"
            rows[f"{backlog:,}, {workers_text(workers)}"] = cells
        lines += grid("drain: ready jobs at release, workers", rows)
        lines += render_growth(drain, systems)
    if pickup:
        rows = {w: {k: spread_cell(v, 2) for k, v in c.items()} for w, c in pickup.items()}
        lines += grid("pickup, idle queue", rows)
    return lines


def render_growth(
    drain: dict[tuple[int, int], dict[str, list[float]]], systems: list[str]
) -> list[str]:
    """Per workers: the drain at the largest backlog ÷ at the smallest, for each system; jobtui's
    against issue 24's ≥ 0.6× when those are 2,000,000 and 20,000."""
    titles = dict(COLUMNS)
    backlogs = sorted({b for b, _ in drain})
    if len(backlogs) < 2:
        return []
    small, large = backlogs[0], backlogs[-1]
    low, high, limit = GROWTH_TARGET
    rows: dict[str, dict[str, str]] = {}
    for workers in sorted({w for _, w in drain}):
        a, b = drain.get((small, workers), {}), drain.get((large, workers), {})
        cells = {}
        for s in systems:
            if s in a and s in b:
                ratio = statistics.median(b[s]) / statistics.median(a[s])
                text = f"{ratio:.2f}×"
                if s == "jobtui" and (small, large) == (low, high):
                    text += " — met" if ratio >= limit else " — missed"
                cells[titles.get(s, s)] = text
        if cells:
            rows[workers_text(workers)] = cells
    if not rows:
        return []
    target = f" (issue 24: ≥ {limit}× for jobtui)" if (small, large) == (low, high) else ""
    return grid(f"drain at {large:,} ÷ at {small:,}{target}", rows)


def render_history(history: dict[str, Any]) -> list[str]:
    """p50 / p95 ms of each console read per number of finished jobs kept."""
    timings = history["timings_ms"]
    rows: dict[str, dict[str, str]] = {}
    for n in sorted(timings, key=int):
        for read, values in timings[n].items():
            rows.setdefault(read, {})[f"{int(n):,} finished, p50 / p95 ms"] = (
                f"{fmt(statistics.median(values), 1)} / {fmt(percentile(values, 95), 1)}"
            )
    head = (
        f"The console's reads as the history grows: measured {history.get('date', '?')} with "
        f"`{history.get('command', '?')}`; {history.get('ready', 0):,} ready jobs and "
        f"{history.get('dead', 0):,} dead letters beside the history, {history.get('runs', '?')} "
        "runs each."
    )
    return [head, "", *grid("read", rows)]


def render_write_cost(run: dict[str, Any]) -> str:
    """benchmarks/write_cost.py's recorded run: a row per variant, a column per write, each cell
    µs per job median [min–max] (rounds) and the median's ratio to the baseline's."""
    writes = [str(w) for w in run["writes"]]
    rows = {
        str(v["variant"]): {
            w: f"{spread_cell(v['us_per_job'][w], 0)} µs, {v['ratio'][w]:.2f}×" for w in writes
        }
        for v in run["variants"]
    }
    machine = run.get("machine", {})
    load = run.get("load", {})
    loads = " and ".join(f"{load[k][0]:.2f} {k}" for k in ("before", "after") if load.get(k))
    return "\n".join(
        [
            *grid("µs per job (ratio to the article's)", rows),
            f"Measured {run.get('date', '?')} with `{run.get('command', '?')}`: "
            f"{run.get('rounds', '?')} rounds of {run.get('jobs', 0):,} jobs per variant in "
            f"blocks of {run.get('block', '?')}, timed {run.get('timed', '?')}; "
            f"{machine.get('cores', '?')} cores ({machine.get('cpu_model', '?')}), PostgreSQL "
            f"{machine.get('postgresql', '?')}, load average (1 min) {loads or '?'} the run.",
        ]
    )


def render_floor_targets(run: dict[str, Any]) -> str:
    """benchmarks/floor_targets.py's recorded run: one row per target with the floor's figure,
    jobtui's, jobtui ÷ floor (median [min–max] (rounds) each) and met/missed on the median."""
    lines = [
        "| target | floor (the article's table, same run) | floor's figure | jobtui | "
        "jobtui ÷ floor | |",
        "|---|---|---|---|---|---|",
    ]
    for t in run["targets"]:
        digits, unit = int(t["digits"]), str(t["unit"])
        row = [
            f"{t['target']} {t['limit']}",
            str(t["floor"]),
            f"{spread_cell(t['floor_values'], digits)} {unit}",
            f"{spread_cell(t['jobtui_values'], digits)} {unit}",
            f"{spread_cell(t['ratios'], 2)}×",
            "met" if t["met"] else "missed",
        ]
        lines.append(md_row(row))
    machine = run.get("machine", {})
    load = run.get("load", {})
    loads = " and ".join(f"{load[k][0]:.2f} {k}" for k in ("before", "after") if load.get(k))
    lines += [
        "",
        f"Measured {run.get('date', '?')} with `{run.get('command', '?')}`: "
        f"{run.get('rounds', '?')} rounds, each ratio jobtui's figure over the floor's in the "
        "same round, a target met when the median ratio is within it; "
        f"{machine.get('cores', '?')} cores ({machine.get('cpu_model', '?')}), PostgreSQL "
        f"{machine.get('postgresql', '?')}, load average (1 min) {loads or '?'} the run.",
    ]
    return "\n".join(lines)


def replace_between(text: str, table: str, markers: tuple[str, str], where: Path) -> str:
    """`text` with what lies between the two markers replaced by `table`."""
    start, end = markers
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise TableError(f"{where}: needs one {start} … {end} pair")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{table}\n{end}{tail}"


def load(path: Path) -> Any:
    """A results JSON, or a TableError that says what is wrong with it."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise TableError(f"{path}: {exc.strerror}; run its `make bench…` target first") from None
    except json.JSONDecodeError as exc:
        raise TableError(f"{path}: not JSON ({exc})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/table.py", description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="results JSON written by benchmarks/run.py")
    parser.add_argument(
        "--page",
        "--readme",
        dest="readme",
        type=Path,
        default=PAGE,
        help="the page with the markers (default docs/performance.md)",
    )
    parser.add_argument("--print", action="store_true", help="print the table, change nothing")
    parser.add_argument("--allow-quick", action="store_true", help="accept a quick run's results")
    parser.add_argument("--matrix", type=Path, help="`make bench-matrix`'s results JSON")
    parser.add_argument("--history", type=Path, help="`make bench-history`'s results JSON")
    args = parser.parse_args(argv)
    try:
        results = load(args.results)
        if not isinstance(results, dict) or "figures" not in results:
            raise TableError(f"{args.results}: not a results file from benchmarks/run.py")
        if results.get("mode") == "quick" and not args.allow_quick:
            raise TableError(f"{args.results}: a quick (smoke) run; --allow-quick to use it")
        table = render(results, (ROOT / PLOT).exists())
        growth = [
            *(render_matrix(load(args.matrix)) if args.matrix else []),
            *(render_history(load(args.history)) if args.history else []),
        ]
        write_cost = render_write_cost(results[WRITE_COST]) if WRITE_COST in results else ""
        floors = render_floor_targets(results[FLOOR_TARGETS]) if FLOOR_TARGETS in results else ""
        if args.print:
            extra = [t for t in (write_cost, floors) if t]
            print("\n".join([table, "", *growth, *extra]))
        else:
            text = replace_between(args.readme.read_text(), table, (START, END), args.readme)
            if growth:
                text = replace_between(text, "\n".join(growth).rstrip(), GROWTH, args.readme)
            if write_cost:
                text = replace_between(text, write_cost, WRITE_COST_MARKERS, args.readme)
            if floors:
                text = replace_between(text, floors, FLOOR_MARKERS, args.readme)
            args.readme.write_text(text)
            print(f"{args.readme}: performance tables rewritten from {args.results}", end="")
            print(f", {args.matrix}, {args.history}" if growth else "")
    except (KeyError, TypeError) as exc:
        print(f"bench-table: results without the expected field {exc}", file=sys.stderr)
        return 1
    except TableError as exc:
        print(f"bench-table: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
