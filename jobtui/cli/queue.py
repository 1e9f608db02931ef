"""`jobtui enqueue`: one job from arguments, or many from a JSON-lines file (or stdin)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from typing import Any

from jobtui.cli.args import (
    INT4_MAX,
    INT4_MIN,
    Args,
    Commands,
    attempts,
    duration,
    whole_within,
)
from jobtui.cli.errors import EXIT_USAGE, CliError
from jobtui.cli.progress import progress
from jobtui.cli.session import dsn_of, out, plural, schema_of
from jobtui.config import InvalidDuration, parse_duration
from jobtui.db import check_schema, connect
from jobtui.enqueue import InvalidJob, JobSpec, enqueue, enqueue_many

LINE_FIELDS = frozenset({"kind", "payload", "run_at", "delay", "max_attempts", "priority"})


def register(commands: Commands) -> None:
    p = commands.add(
        "enqueue",
        "Enqueue one job, or many from a JSON-lines file.",
        cmd_enqueue,
        'jobtui enqueue send_email \'{"to": "ann@example.com"}\'',
        "jobtui enqueue generate_report '{\"id\": 7}' --delay 10m --priority 5",
        'jobtui enqueue --file jobs.jsonl   # one {"kind":…, "payload":…} per line',
        "cat jobs.jsonl | jobtui enqueue --file -",
    )
    p.add_argument("kind", nargs="?", help="job kind")
    p.add_argument(
        "payload", nargs="?", metavar="PAYLOAD_JSON", help="payload as JSON (default {})"
    )
    p.add_argument(
        "--file",
        metavar="PATH",
        help="JSON lines: kind, payload and optionally run_at, delay, max_attempts, "
        "priority; - reads stdin",
    )
    p.add_argument("--delay", type=duration, metavar="DURATION", help="run after this long")
    p.add_argument(
        "--run-at", type=_iso_time, metavar="ISO8601", help="run at this time (with a UTC offset)"
    )
    p.add_argument(
        "--max-attempts",
        type=attempts,
        default=None,
        metavar="N",
        help="attempts before it goes to dead letters (default 5; a handler's declared "
        "max_attempts decides for its kind)",
    )
    p.add_argument(
        "--priority",
        type=whole_within(INT4_MIN, INT4_MAX),
        default=None,
        help="higher runs first, in every kind (default 0)",
    )


def cmd_enqueue(args: Args) -> int:
    schema = schema_of(args)
    if args.file:
        return _enqueue_file(args, schema)
    if not args.kind:
        # a usage error (exit 2) as argparse's own: `jobtui enqueue` alone exited 1
        raise CliError("give a job KIND (and optionally PAYLOAD_JSON), or --file PATH", EXIT_USAGE)
    payload = _parse_payload(args.payload)
    options: dict[str, Any] = {"schema": schema}
    if args.delay is not None:
        options["delay"] = timedelta(seconds=args.delay)
    if args.run_at:
        options["run_at"] = args.run_at
    if args.max_attempts is not None:
        options["max_attempts"] = args.max_attempts
    if args.priority is not None:
        options["priority"] = args.priority
    with connect(dsn_of(args), autocommit=False) as conn:
        check_schema(conn, schema)
        job = enqueue(conn, args.kind, payload, **options)
        conn.commit()
    out(str(job))
    return 0


def _enqueue_file(args: Args, schema: str) -> int:
    if args.kind or args.payload:
        raise CliError("give either KIND [PAYLOAD_JSON] or --file, not both")
    if args.delay is not None or args.run_at or args.max_attempts or args.priority is not None:
        raise CliError("with --file, put run_at/delay/max_attempts/priority in each line")
    specs = _read_specs(args.file)
    if not specs:  # never "enqueued 0 jobs" with exit 0
        raise CliError(
            f"nothing enqueued: {'<stdin>' if args.file == '-' else args.file} has no jobs"
        )
    with connect(dsn_of(args), autocommit=False) as conn:
        check_schema(conn, schema)
        conn.rollback()
        with progress("enqueueing", len(specs)) as update:
            n = enqueue_many(conn, specs, schema=schema, on_progress=update)
        conn.commit()
    out(f"enqueued {plural(n, 'job')}")
    return 0


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"invalid JSON payload: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise CliError("invalid JSON payload: nested too deeply") from None


def _iso_time(text: str) -> datetime:
    """argparse type (`--run-at`, a usage error as `--delay`'s: it exited 1, --delay 2): an ISO
    8601 time with a UTC offset."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time, e.g. 2030-01-31T09:00:00+00:00"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset; add one, e.g. +00:00 or Z")
    return value


def _parse_time(value: object, where: str) -> datetime:
    """A JSON line's run_at: a string `_iso_time` reads (a number said `unexpected
    AttributeError: 'int' object has no attribute 'tzinfo'`)."""
    if not isinstance(value, str):
        raise CliError(f"{where}: expected an ISO 8601 time as a string, not {value!r}")
    try:
        return _iso_time(value)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"{where}: {exc}") from None


def _line_spec(lineno: int, raw: str, path: str) -> JobSpec:
    where = f"{path}: line {lineno}"
    try:
        item = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise CliError(f"{where}: invalid JSON: nested too deeply") from None
    if not isinstance(item, dict):
        raise CliError(f'{where}: expected an object with "kind" and "payload"')
    unknown = set(item) - LINE_FIELDS
    if unknown:
        raise CliError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    if "kind" not in item:
        raise CliError(f'{where}: missing "kind"')
    fields = dict(item)
    fields.setdefault("payload", {})
    try:
        if fields.get("run_at") is not None:
            fields["run_at"] = _parse_time(fields["run_at"], f"{where}: run_at")
        if fields.get("delay") is not None:
            fields["delay"] = parse_duration(str(fields["delay"]))
        for key in ("max_attempts", "priority"):
            if key in fields and fields[key] is None:
                del fields[key]
        return JobSpec(**fields).validated()
    except CliError:
        raise
    except (InvalidJob, InvalidDuration, TypeError) as exc:
        raise CliError(f"{where}: {exc}") from None


def _read_specs(path: str) -> list[JobSpec]:
    """The jobs of a JSON-lines file or stdin, both read alike: stdin, read as text, took a
    UTF-16 file as `invalid JSON` (not `not UTF-8 text`) and kept a lone CR as part of a line."""
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        with open(path, "rb") as fh:
            data, name = fh.read(), path
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    # JSON lines end at \n, \r\n or \r (as a file read as text ends them), not U+2028.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines:  # a byte-order mark, as Windows editors save UTF-8, is no part of line 1's JSON
        lines[0] = lines[0].removeprefix("\ufeff")
    return [_line_spec(n, raw, name) for n, raw in enumerate(lines, 1) if raw.strip()]
