"""`jobtui stats` and `jobtui check`: the queue's figures for people, scripts and monitoring.

Both judge the alert rules of the config file (`jobtui.alerts`, the console's too), so a rule
that fires in the console fires in `check` and reads 1 in `stats --prometheus`. `stats` output
is a list of `Section`s, each rendered in every format, so another part is one more entry.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from jobtui import alerts, dbhealth
from jobtui.alerts import AlertRules, Verdict
from jobtui.cli import nagios
from jobtui.cli import output as fmt
from jobtui.cli.args import Args, Commands, config_path, duration, non_negative_int
from jobtui.cli.errors import EXIT_FAILURE, CliError, explain, one_line
from jobtui.cli.session import (
    base_schema,
    err,
    out,
    run_with_connection,
    targets_of,
    without_passwords,
)
from jobtui.console_config import load_console_config
from jobtui.fleet import gather
from jobtui.inert import ascii_json, clean
from jobtui.inert import prometheus_label as _label
from jobtui.metrics import snapshot
from jobtui.models import Snapshot

CONFIG_HELP = (
    "config file with the [alerts] rules "
    "(default: $JOBTUI_CONFIG or ~/.config/jobtui/config.toml; the console's)"
)


def register(commands: Commands) -> None:
    p = commands.add(
        "stats",
        "Print the queue's figures (human, JSON or Prometheus text).",
        cmd_stats,
        "jobtui stats",
        "jobtui stats --json | jq .totals",
        "jobtui stats --prometheus --output /var/lib/node_exporter/textfile/jobtui.prom",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="JSON for scripts")
    g.add_argument("--prometheus", action="store_true", help="Prometheus text exposition format")
    p.add_argument(
        "--output",
        metavar="PATH",
        help="write to PATH atomically (for a textfile collector) instead of stdout",
    )
    p.add_argument(
        "--window",
        type=duration,
        default=900.0,
        metavar="DURATION",
        help="window for rates and percentiles (default 15m)",
    )
    p.add_argument(
        "--config", type=config_path, metavar="PATH", default=argparse.SUPPRESS, help=CONFIG_HELP
    )

    p = commands.add(
        "check",
        "Nagios/Icinga check: a status line, then one line per problem; exit 0 OK, "
        "1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        cmd_check,
        "Without threshold flags it judges the alert rules of the config file ([alerts], the "
        "console's),\nand prints the plugin format: a first line with the status, the counts of "
        "problems per level,\nthe worst problem and the performance data after `|`; then one "
        "line per problem, critical\nfirst, each ending with its rule's name in brackets. "
        "With flags it judges "
        "just those, on the\nwhole queue: a value above a --max-* threshold is WARNING; above "
        "the matching --crit-* threshold\n(default: twice the --max-* value) it is CRITICAL. "
        "Unreachable database, missing schema or a\nbad config file: UNKNOWN.",
        "jobtui check",
        "jobtui check --max-oldest-age 10m --max-dead 0 --max-ready 10000",
        "jobtui check --max-oldest-age 5m --crit-oldest-age 30m",
    )
    p.error_exit_code = nagios.UNKNOWN
    levels: list[tuple[str, Callable[[str], float], str, str]] = [
        ("oldest-age", duration, "DURATION", "warn when the oldest ready job waited longer"),
        ("dead", non_negative_int, "N", "warn above N dead letters"),
        ("ready", non_negative_int, "N", "warn above N ready jobs"),
        (
            "replica-lag",
            duration,
            "DURATION",
            "on a standby, the replay lag above which to warn (a primary is always fine)",
        ),
    ]
    for flag, type_, metavar, warn in levels:
        p.add_argument(f"--max-{flag}", type=type_, metavar=metavar, help=warn)
        p.add_argument(
            f"--crit-{flag}",
            type=type_,
            metavar=metavar,
            help=f"the critical level (default: twice --max-{flag})",
        )
    p.add_argument(
        "--config", type=config_path, metavar="PATH", default=argparse.SUPPRESS, help=CONFIG_HELP
    )


def alert_rules(args: Args) -> AlertRules:
    """The config file's alert rules (`--config`, else the console's default file)."""
    path = getattr(args, "config", None)
    return load_console_config(Path(path) if path else None).alerts


@dataclass(frozen=True)
class Section:
    """One part of `stats` output in every format: JSON keys, Prometheus families, text."""

    json: dict[str, Any] = field(default_factory=dict)
    prometheus: list[str] = field(default_factory=list)  # lines, without newlines
    text: str = ""


def family(name: str, help_: str, samples: Sequence[tuple[dict[str, str], float]]) -> list[str]:
    """One Prometheus gauge family: HELP, TYPE and its samples."""
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        lbl = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        lines.append(f"{name}{{{lbl}}} {value!r}" if lbl else f"{name} {value!r}")
    return lines


def queue_section(snap: Snapshot) -> Section:
    """The snapshot: counts, rates, kinds (with their drain estimate fields) and workers."""
    return Section(
        json={**fmt.to_jsonable(snap), "throughput_source": fmt.THROUGHPUT_SOURCE},
        prometheus=fmt.prometheus_text(snap).splitlines(),
        text=fmt.stats_text(snap),
    )


def drain_section(snap: Snapshot) -> Section:
    """Issue 12's drain estimate per kind in Prometheus (JSON has it in `kinds`)."""
    kinds = snap.kinds
    return Section(
        prometheus=[
            *family(
                "jobtui_kind_arrived_per_minute",
                "Jobs of a kind created per minute over the window.",
                [({"kind": k.kind}, float(k.arrived_per_min)) for k in kinds],
            ),
            *family(
                "jobtui_kind_drain_seconds",
                "Estimated seconds until a kind's backlog is gone: backlog / (completion rate - "
                "arrival rate); absent while not draining or unknown.",
                [({"kind": k.kind}, float(k.drain_s)) for k in kinds if k.drain_s is not None],
            ),
            *family(
                "jobtui_kind_not_draining",
                "1 when a kind has a backlog and arrivals keep up with completions.",
                [({"kind": k.kind}, 1.0 if k.not_draining else 0.0) for k in kinds],
            ),
        ]
    )


def alerts_section(verdicts: Sequence[Verdict]) -> Section:
    """Every rule x kind judged: 1/0 and its level in Prometheus, all of them in JSON, the
    firing ones in text."""
    firing = [v for v in verdicts if v.firing]
    labels = [({"rule": v.rule, "kind": v.kind}, v) for v in verdicts]
    lines = [f"  {v.level.name:<4}  {clean(v.text)} [{v.rule}]" for v in firing]
    return Section(
        json={"alerts": [_verdict_json(v) for v in verdicts]},
        prometheus=[
            *family(
                "jobtui_alert",
                'Alert rules by rule and kind (kind="*": the whole queue): 1 firing, 0 not.',
                [(lbl, 1.0 if v.firing else 0.0) for lbl, v in labels],
            ),
            *family(
                "jobtui_alert_level",
                "Level of each alert rule by kind: 0 ok, 1 warning, 2 critical.",
                [(lbl, float(v.level)) for lbl, v in labels],
            ),
        ],
        text="\n".join(["alerts firing:", *lines])
        if firing
        else f"alerts: none firing ({len(verdicts)} rule checks)",
    )


def _verdict_json(v: Verdict) -> dict[str, Any]:
    def finite(x: float | None) -> float | None:
        return x if x is not None and math.isfinite(x) else None

    return {
        "rule": v.rule,
        "kind": v.kind,
        "level": v.level.name.lower(),
        "firing": v.firing,
        "value": finite(v.value),
        "threshold": finite(v.threshold),
        "text": v.text,
    }


def database_section(health: dbhealth.DbHealth) -> Section:
    """Issue 12's Database tab figures: the vacuum blocker, tables, NOTIFY, connections."""
    c = health.connections
    summary = (
        f"database: connections {c.in_use} of {c.max_connections} "
        f"(workers {c.workers}, consoles {c.consoles}, others {c.others}); "
        f"NOTIFY queue {health.notify_usage:.0%}"
    )
    b = health.blocker
    if b is not None:
        what = "oldest transaction" if b.kind == dbhealth.SESSION else "what is"
        summary += f"; {what} holding back vacuum: {b.label()}"
    lines = [summary, *(f"  warning: {clean(w)}" for w in health.warnings)]
    return Section(
        json={"database": dbhealth.as_json(health)},
        prometheus=dbhealth.prometheus_lines(health),
        text="\n".join(lines),
    )


def stats_sections(
    snap: Snapshot, rules: AlertRules, health: dbhealth.DbHealth | None = None
) -> list[Section]:
    """What `stats` prints, in order."""
    sections = [queue_section(snap), drain_section(snap)]
    if health is not None:
        sections.append(database_section(health))
    return [*sections, alerts_section(alerts.assess(snap, rules))]


def render(sections: Sequence[Section], *, prometheus: bool = False, json: bool = False) -> str:
    """The sections as Prometheus text, one JSON object, or text for people."""
    if prometheus:
        return "".join(line + "\n" for s in sections for line in s.prometheus)
    if json:
        merged: dict[str, Any] = {}
        for s in sections:
            merged.update(s.json)
        return ascii_json(merged, indent=2) + "\n"
    return "\n\n".join(s.text for s in sections if s.text) + "\n"


def cmd_stats(args: Args) -> int:
    rules = alert_rules(args)  # a bad config file fails before connecting

    async def read(conn: psycopg.AsyncConnection, schema: str) -> list[Section]:
        snap = await snapshot(conn, schema, window_minutes=max(1, round(args.window / 60)))
        health = await dbhealth.collect(conn, schema)
        return stats_sections(snap, rules, health)

    def emit(text: str) -> None:
        if args.output:
            _write_atomically(Path(args.output), text)
        else:
            sys.stdout.write(text)

    # --- several targets (issue 28): see jobtui/cli/many.py ---
    chosen = targets_of(args)
    if chosen:
        from jobtui.cli import many

        outcomes = asyncio.run(gather(chosen, base_schema(args), read))
        emit(many.render_stats(outcomes, prometheus=args.prometheus, json=args.json))
        for o in outcomes:
            if o.error is not None:
                err(f"jobtui: error: target {o.target.key}: {one_line(o.error)}")
        return 0 if all(o.error is None for o in outcomes) else EXIT_FAILURE
    # --- one database ---

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        sections = await read(conn, schema)
        emit(render(sections, prometheus=args.prometheus, json=args.json))
        return 0

    return run_with_connection(args, body)


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a collector never reads half a file. A
    failure names `path` as given, not the temporary file (`/no/dir/.file.f0fj76qp`).

    Only a regular file is renamed over: a symlink's target is (the link stays), and a FIFO or
    a device (`--output /dev/stdout`) is written through. Renaming over those replaced them
    with a plain file, as root even /dev/stdout and /dev/full."""
    try:
        if path.exists() and not path.is_file():
            with open(path, "w", encoding="utf-8") as out_:
                out_.write(text)
            return
        real = Path(os.path.realpath(path)) if path.is_symlink() else path
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", dir=real.parent)
    except OSError as exc:
        raise CliError(f"--output {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, real)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise CliError(f"--output {path}: {exc.strerror or exc}") from None
        raise


def cmd_check(args: Args) -> int:
    flags = {
        "oldest-age": (args.max_oldest_age, args.crit_oldest_age),
        "dead": (args.max_dead, args.crit_dead),
        "ready": (args.max_ready, args.crit_ready),
        "replica-lag": (args.max_replica_lag, args.crit_replica_lag),
    }
    for name, (warn, crit) in flags.items():
        if crit is not None and warn is not None and crit < warn:
            code, line = nagios.unknown(f"--crit-{name} is below --max-{name}")
            out(line)
            return code

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        snap = await snapshot(conn, schema, history_minutes=1)
        code, text = nagios.evaluate(snap, rules)  # inert already, line by line
        out(text)
        return code

    async def read(conn: psycopg.AsyncConnection, schema: str) -> nagios.Report:
        return nagios.report(await snapshot(conn, schema, history_minutes=1), rules)

    try:
        rules = nagios.flag_rules(flags) or alert_rules(args)
        chosen = targets_of(args)
        if chosen:  # several targets (issue 28): one verdict over all, see jobtui/cli/many.py
            from jobtui.cli import many

            code, text = many.check_text(asyncio.run(gather(chosen, base_schema(args), read)))
            out(text)
            return code
        return run_with_connection(args, body)
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        code, line = nagios.unknown(one_line(without_passwords(explain(exc)[0], args)))
        out(line)
        return code
