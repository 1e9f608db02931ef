"""`jobtui workers list`, and `jobtui workers quiet|resume|stop WORKER_ID`: an operator's
request to one worker, through its `workers` row (jobtui.worker_control; audited, and
announced by NOTIFY).

The command returns once the request is committed; the worker acts on the NOTIFY at once, or
after its next heartbeat when it hears none. `jobtui workers list` lists worker ids.
"""

from __future__ import annotations

import psycopg

from jobtui import ops
from jobtui.cli.args import Args, Commands
from jobtui.cli.errors import CliError
from jobtui.cli.output import dumps, table
from jobtui.cli.session import out, run_with_connection
from jobtui.config import format_duration
from jobtui.control_state import control_text
from jobtui.inert import clean
from jobtui.metrics import snapshot
from jobtui.worker_control import control_worker

HELP = {
    "quiet": "Stop a worker claiming; its running jobs finish and it keeps heartbeating (audited).",
    "resume": "Let a quieted worker claim again (audited).",
    "stop": "Stop a worker: it stops claiming, drains as on SIGTERM and exits (audited).",
}


def register(commands: Commands) -> None:
    sub = commands.group(
        "workers",
        "List workers; quiet, resume or stop a running worker.",
        "jobtui workers list",
        "jobtui workers quiet web-1:4242:9f3a1c",
        "jobtui workers resume web-1:4242:9f3a1c",
        "jobtui workers stop web-1:4242:9f3a1c",
    )
    p = sub.add(
        "list",
        "List registered workers: id, host, pid, kinds, running jobs, heartbeat, requests.",
        cmd_list,
        "jobtui workers list",
        "jobtui workers list --json",
    )
    p.add_argument("--json", action="store_true", help="JSON array for scripts")
    for action, help_ in HELP.items():
        p = sub.add(action, help_, cmd_control, f"jobtui workers {action} web-1:4242:9f3a1c")
        p.add_argument("worker_id", metavar="WORKER_ID", help="as `jobtui workers list` shows it")


def cmd_list(args: Args) -> int:
    """Every worker row, live first; exit 0 (an empty list says so)."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        snap = await snapshot(conn, schema, window_minutes=1, history_minutes=1)
        workers = sorted(snap.workers, key=lambda w: (w.stale, w.id))
        if args.json:
            out(dumps(workers))
            return 0
        if not workers:
            out("no workers registered")
            return 0
        rows = [
            (
                w.id,
                w.host,
                w.pid,
                ",".join(w.kinds),
                f"{w.running}/{w.concurrency}",
                format_duration(w.heartbeat_age_s) + " ago" + (" STALE" if w.stale else ""),
                control_text(w) or "–",
            )
            for w in workers
        ]
        headers = ("WORKER", "HOST", "PID", "KINDS", "RUN", "HEARTBEAT", "CONTROL")
        out(table(headers, rows, flex=3))
        return 0

    return run_with_connection(args, body)


def cmd_control(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        outcome = await control_worker(
            conn, schema, args.worker_id, args.action, actor=ops.Actor.current()
        )
        if not outcome.changed:  # nothing happened: say so, exit 1
            raise CliError(clean(outcome.text()))
        out(clean(outcome.text()))
        return 0

    return run_with_connection(args, body)
