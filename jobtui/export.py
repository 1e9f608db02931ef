"""Export dead letters to a file (JSON Lines or CSV) for inspection away from the database.

Rows are read in keyset pages and written as they come, so exporting a million dead letters
needs no more memory than one page. The file appears complete or not at all: it is written
beside the target and renamed into place at the end. A path of `-` writes to standard output.

JSON (every JSONL line, and the payload and errors cells of a CSV) is written by the one escaper's
`ascii_json`: lossless, and no control character reaches a terminal that shows the file. The
plain text cells of a CSV are the stored text, unchanged, so a CSV round-trips exactly.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import psycopg

from jobtui.browse import (
    dead_filter_params,
    dead_row,
    fetch_dicts,
    ids_list,
    statement,
)
from jobtui.inert import ascii_json
from jobtui.models import DeadFilter, DeadLetterRow

FORMATS = ("jsonl", "csv")
PAGE = 1000
COLUMNS = (
    "id",
    "kind",
    "reason",
    "attempts",
    "max_attempts",
    "priority",
    "created_at",
    "run_at",
    "died_at",
    "error_signature",
    "last_error",
    "payload",
    "errors",
)


class InvalidExport(ValueError):
    """An export asked for in a format or with arguments it cannot honour."""


class ExportExists(InvalidExport):
    """The target file exists and overwriting it was not allowed; nothing was written."""


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """jobtui's own folder for files it writes for the operator: $XDG_STATE_HOME/jobtui, else
    ~/.local/state/jobtui (the XDG default). Not the current directory, which is often a
    checkout where an export would end up committed."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "jobtui"


def default_export_path(fmt: str, *, now: datetime | None = None) -> Path:
    """Where the console proposes to write an export: a new, time-stamped file name in
    `state_dir()/exports`."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return state_dir() / "exports" / f"jobtui-dead-{stamp}.{fmt}"


def record(row: DeadLetterRow) -> dict[str, Any]:
    """A dead letter as plain JSON-ready values, in COLUMNS order."""
    return {
        "id": row.id,
        "kind": row.kind,
        "reason": row.reason,
        "attempts": row.attempts,
        "max_attempts": row.max_attempts,
        "priority": row.priority,
        "created_at": row.created_at.isoformat(),
        "run_at": row.run_at.isoformat(),
        "died_at": row.died_at.isoformat(),
        "error_signature": row.error_signature,
        "last_error": row.last_error,
        "payload": row.payload,
        "errors": [
            {
                "attempt": e.attempt,
                "at": e.at,
                "error": e.error,
                "traceback": e.traceback,
                "worker": e.worker,
            }
            for e in row.errors
        ],
    }


class _Writer:
    def __init__(self, out: IO[str], fmt: str) -> None:
        self.out = out
        self.fmt = fmt
        self.csv = csv.DictWriter(out, fieldnames=COLUMNS) if fmt == "csv" else None
        if self.csv:
            self.csv.writeheader()

    def write(self, rec: dict[str, Any]) -> None:
        if self.csv is None:
            self.out.write(ascii_json(rec) + "\n")
            return
        flat = dict(rec)
        flat["payload"] = ascii_json(rec["payload"])
        flat["errors"] = ascii_json(rec["errors"])
        self.csv.writerow(flat)


async def _pages(
    conn: psycopg.AsyncConnection, schema: str, ids: list[int] | None, flt: DeadFilter
) -> AsyncIterator[list[DeadLetterRow]]:
    params: dict[str, Any] = {**dead_filter_params(flt), "limit": PAGE, "before": None}
    if ids is not None:
        name = "browse_dead_by_ids_page"
        chunks = [sorted(ids, reverse=True)[i : i + PAGE] for i in range(0, len(ids), PAGE)]
    else:
        name, chunks = "browse_dead_page", [[]]
    for chunk in chunks:
        params["before"] = None
        if ids is not None:
            params["ids"] = chunk
        while True:
            rows = await fetch_dicts(conn, statement(schema, name), params)
            if rows:
                yield [dead_row(r) for r in rows]
            if len(rows) < PAGE:
                break
            params["before"] = rows[-1]["id"]


async def export_dead(
    conn: psycopg.AsyncConnection,
    schema: str,
    path: Path,
    *,
    ids: Sequence[int] | None = None,
    flt: DeadFilter | None = None,
    fmt: str = "jsonl",
    overwrite: bool = True,
) -> int:
    """Write the dead letters chosen by `ids` and/or `flt` (all when neither) to `path`.

    Newest first; returns how many were written. `fmt` is "jsonl" (one JSON object per line)
    or "csv" (payload and error history as JSON text in their cells). With `overwrite=False`
    an existing `path` is left as it is (ExportExists), even one created while writing.
    """
    if fmt not in FORMATS:
        raise InvalidExport(f"unknown export format {fmt!r}: use {' or '.join(FORMATS)}")
    wanted = ids_list(ids) if ids is not None else None
    flt = flt or DeadFilter()
    dead_filter_params(flt)  # refuse a bad filter before creating any file
    if str(path) == "-":
        return await _write(conn, schema, sys.stdout, fmt, wanted, flt)
    path = Path(path)
    if path.is_dir():
        raise InvalidExport(f"{path} is a directory; give a file name")
    if not overwrite and path.exists():
        raise ExportExists(f"{path} exists; not overwritten")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        out = tmp.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise InvalidExport(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with out:
            n = await _write(conn, schema, out, fmt, wanted, flt)
        _put(tmp, path, overwrite)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def _put(tmp: Path, path: Path, overwrite: bool) -> None:
    """Move the finished file into place; without `overwrite`, never over an existing file
    (a hard link fails if the name exists; where links are not supported, check and rename)."""
    if overwrite:
        tmp.replace(path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise ExportExists(f"{path} exists; not overwritten") from None
    except OSError:
        if path.exists():
            raise ExportExists(f"{path} exists; not overwritten") from None
        tmp.replace(path)
        return
    tmp.unlink()


async def _write(
    conn: psycopg.AsyncConnection,
    schema: str,
    out: IO[str],
    fmt: str,
    ids: list[int] | None,
    flt: DeadFilter,
) -> int:
    writer = _Writer(out, fmt)
    n = 0
    if ids is not None and not ids:
        return 0
    async for page in _pages(conn, schema, ids, flt):
        for row in page:
            writer.write(record(row))
        n += len(page)
    out.flush()
    return n
