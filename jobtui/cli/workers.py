"""`jobtui workers quiet|resume|stop WORKER_ID`: an operator's request to one worker, through
its `workers` row (jobtui.worker_control; audited, and announced by NOTIFY).

The command returns once the request is committed; the worker acts on the NOTIFY at once, or
after its next heartbeat when it hears none. `jobtui stats` lists worker ids.
"""

from __future__ import annotations

import psycopg

from jobtui import ops
from jobtui.cli.args import Args, Commands
from jobtui.cli.session import out, run_with_connection
from jobtui.inert import clean
from jobtui.worker_control import control_worker

HELP = {
    "quiet": "Stop a worker claiming; its running jobs finish and it keeps heartbeating (audited).",
    "resume": "Let a quieted worker claim again (audited).",
    "stop": "Stop a worker: it stops claiming, drains as on SIGTERM and exits (audited).",
}


def register(commands: Commands) -> None:
    sub = commands.group(
        "workers",
        "Quiet, resume or stop a running worker.",
        "jobtui workers quiet web-1:4242:9f3a1c",
        "jobtui workers resume web-1:4242:9f3a1c",
        "jobtui workers stop web-1:4242:9f3a1c",
    )
    for action, help_ in HELP.items():
        p = sub.add(action, help_, cmd_control, f"jobtui workers {action} web-1:4242:9f3a1c")
        p.add_argument("worker_id", metavar="WORKER_ID", help="as `jobtui stats` lists it")


def cmd_control(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        outcome = await control_worker(
            conn, schema, args.worker_id, args.action, actor=ops.Actor.current()
        )
        out(clean(outcome.text()))
        return 0

    return run_with_connection(args, body)
