"""What the Workers tab asks for a worker: quiet, resume or stop it (jobtui.worker_control).

Posted by the pane as `WorkerControlAsked`; the app confirms (naming the worker and what will
happen) and runs the one `worker_control.control_worker` call, audited like every action.
"""

from __future__ import annotations

from textual.message import Message

# action: (verb, what the operator should know before confirming)
WORKER_ACTIONS: dict[str, tuple[str, str]] = {
    "quiet": (
        "Quiet",
        "it stops claiming jobs; its running jobs finish and it keeps heartbeating, "
        "shown as quiet until resumed",
    ),
    "resume": ("Resume", "it claims jobs again"),
    "stop": (
        "Stop",
        "it stops claiming and exits as on SIGTERM: running jobs get its shutdown grace, then "
        "are given back to the queue; a stop cannot be undone from here",
    ),
}


class WorkerControlAsked(Message):
    """Quiet, resume or stop (`action`, a key of WORKER_ACTIONS) the worker `worker_id`."""

    def __init__(self, worker_id: str, action: str) -> None:
        super().__init__()
        self.worker_id = worker_id
        self.action = action
