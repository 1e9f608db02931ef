"""Key names for people and the text of the help screen, by binding id."""

from __future__ import annotations

KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "plus": "+",
    "minus": "-",
    "escape": "esc",
    "equals_sign": "=",
    "space": "space",
    "number_sign": "#",
    "exclamation_mark": "!",
}


def key_display(keys: str) -> str:
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


HELP_TEXT = {
    "quit": "quit",
    "help": "this help",
    "tab.overview": "Overview tab",
    "tab.jobs": "Jobs tab",
    "tab.dead": "Dead letters tab",
    "tab.workers": "Workers tab",
    "tab.schedules": "Schedules tab",
    "tab.database": "Database tab",
    "refresh.pause": "pause / resume live refresh",
    "refresh.faster": "refresh more often",
    "refresh.slower": "refresh less often",
    "back": "back (focus the main table)",
    "down": "cursor down",
    "up": "cursor up",
    "first": "first row, and back to the left edge",
    "last": "last row (loads more pages)",
    "mark": "mark / unmark the row, then move down",
    "sort": "sort by the next column (header ▲); after the last, the tab's own order",
    "sort.reverse": "reverse the sort (header ▼)",
    "wide": "all columns, scrolled sideways with ← →; again: fit the screen (+N→ = hidden)",
    "jobs.all": "unfinished jobs (the default) / all jobs",
    "jobs.oldest": "the oldest ready job (of the kind in force), read from the database",
    "jobs.count_exact": "count the matching jobs exactly, once (until the filter changes)",
    "jobs.copy": "copy the id, payload or traceback of the cursor row (OSC 52)",
    "jobs.save": "save the id, payload or traceback of the cursor row to a file",
    "jobs.run_again": "run finished jobs again as new linked jobs (asks)",
    "dead.copy": "copy the id, payload or traceback of the cursor row (OSC 52)",
    "dead.save": "save the id, payload or traceback of the cursor row to a file",
    "database.cancel_backend": "cancel the vacuum blocker's running query (asks; audited)",
    "database.terminate_backend": "terminate the vacuum blocker's backend (asks; audited)",
    "database.end_prepared": "end the prepared transaction holding back vacuum (asks; audited)",
    "database.drop_slot": "drop the replication slot holding back vacuum (asks; audited)",
    "requeue.group": "requeue every dead letter of the group, or all matching (asks)",
    "delete.group": "delete every dead letter of the group, or all matching (asks)",
    "overview.alarms": "every alarm firing, worst first (the Overview shows the first few)",
    "pause_kind": "pause / resume the kind under the cursor",
    "kind_limits": "set / clear the kind's concurrency and rate limits (asks)",
    "worker.quiet": "quiet the worker (stops claiming, running jobs finish) / resume it (asks)",
    "worker.stop": "stop the worker: it drains as on SIGTERM and exits (asks)",
    "schedule.pause": "pause / resume the schedule under the cursor (asks)",
    "schedule.run_now": "run the schedule now: enqueue one job (asks)",
    "filter": "filter (see below)",
    "cancel": "cancel marked jobs or the one under the cursor (asks)",
    "run_now": "run now: make scheduled / retrying jobs due",
    "clear_marks": "clear all marks",
    "next_page": "load the next page",
    "requeue": "requeue the marked rows or the cursor row (asks)",
    "delete": "delete the marked rows or the cursor row (asks, cannot be undone)",
    "export": "export selected or matching rows to JSONL or CSV",
    "detail.back": "back",
    "detail.cancel": "cancel this job (asks)",
    "detail.run_now": "run this waiting job now (asks)",
    "detail.requeue": "requeue this dead letter (asks)",
    "detail.run_again": "run this finished job again as a new linked job (asks)",
    "detail.open": "open the linked job (requeued as, rerun as, rerun of)",
    "detail.copy": "copy the id, payload or traceback (OSC 52)",
    "detail.save": "save the id, payload or traceback to a file",
    "detail.delete": "delete this dead letter (asks)",
    "detail.down": "scroll down",
    "detail.up": "scroll up",
}

HELP_NOTES = [
    "Filters (/): jobs — state:ready,running kind:NAME key:UNIQUE-KEY and free text (an id, "
    "payload or error text); dead letters — kind:NAME error:TEXT sig:SIGNATURE and free text. "
    "kind: may be the start of a kind's name (kind:email is email.send); → completes it.",
    "Columns: what says something is wrong comes first and stays; others drop on a narrow "
    "screen, and +N→ in the header counts them (w shows them all).",
    "After an action the cursor stays put: a row that went is shown struck through until "
    "the cursor moves, and keys do nothing on it.",
    "Bulk and destructive actions ask first, name the exact count, and let you choose between "
    "exactly the selected rows and every row matching now.",
    "Throughput (done/m), failure rates and p50/p95 count jobs finished by jobtui's own "
    "workers only; rows another consumer finishes are not in them.",
    "Ages are measured against the database server's clock, not this machine's.",
    "Keys can be remapped by binding id in ~/.config/jobtui/config.toml ($JOBTUI_CONFIG), "
    'table [keys], e.g.  requeue = "r,R".',
]
