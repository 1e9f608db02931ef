"""`jobtui stats` and `jobtui check`: the queue's figures for people, scripts and monitoring."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import psycopg

from jobtui.cli import nagios
from jobtui.cli import output as fmt
from jobtui.cli.args import Args, Commands, duration, non_negative_int
from jobtui.cli.errors import explain, one_line
from jobtui.cli.session import out, run_with_connection
from jobtui.inert import clean
from jobtui.metrics import snapshot


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

    p = commands.add(
        "check",
        "Nagios/Icinga check: one status line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        cmd_check,
        "A value above a --max-* threshold is WARNING; above the matching --crit-* "
        "threshold (default: twice\nthe --max-* value) it is CRITICAL. "
        "Unreachable database or missing schema: UNKNOWN.",
        "jobtui check --max-oldest-age 10m --max-dead 0 --max-ready 10000",
        "jobtui check --max-oldest-age 5m --crit-oldest-age 30m",
    )
    p.error_exit_code = nagios.UNKNOWN
    p.add_argument("--max-oldest-age", type=duration, metavar="DURATION")
    p.add_argument("--crit-oldest-age", type=duration, metavar="DURATION")
    p.add_argument("--max-dead", type=non_negative_int, metavar="N")
    p.add_argument("--crit-dead", type=non_negative_int, metavar="N")
    p.add_argument("--max-ready", type=non_negative_int, metavar="N")
    p.add_argument("--crit-ready", type=non_negative_int, metavar="N")
    p.add_argument(
        "--max-replica-lag",
        type=duration,
        metavar="DURATION",
        help="on a standby, the replay lag above which to warn (a primary is always fine)",
    )
    p.add_argument("--crit-replica-lag", type=duration, metavar="DURATION")


def cmd_stats(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        snap = await snapshot(conn, schema, window_minutes=max(1, round(args.window / 60)))
        if args.prometheus:
            text = fmt.prometheus_text(snap)
        elif args.json:
            text = fmt.stats_json(snap) + "\n"
        else:
            text = fmt.stats_text(snap) + "\n"
        if args.output:
            _write_atomically(Path(args.output), text)
        else:
            sys.stdout.write(text)
        return 0

    return run_with_connection(args, body)


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a collector never reads half a file."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_check(args: Args) -> int:
    limits = nagios.CheckLimits(
        oldest_age_s=nagios.Threshold(args.max_oldest_age, args.crit_oldest_age),
        dead=nagios.Threshold(args.max_dead, args.crit_dead),
        ready=nagios.Threshold(args.max_ready, args.crit_ready),
        replica_lag_s=nagios.Threshold(args.max_replica_lag, args.crit_replica_lag),
    )
    for name, th in (
        ("oldest-age", limits.oldest_age_s),
        ("dead", limits.dead),
        ("ready", limits.ready),
        ("replica-lag", limits.replica_lag_s),
    ):
        if th.crit is not None and th.warn is not None and th.crit < th.warn:
            code, line = nagios.unknown(f"--crit-{name} is below --max-{name}")
            out(line)
            return code

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        snap = await snapshot(conn, schema, history_minutes=1)
        code, line = nagios.evaluate(snap, limits)
        out(clean(line))
        return code

    try:
        return run_with_connection(args, body)
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        code, line = nagios.unknown(one_line(explain(exc)[0]))
        out(line)
        return code
