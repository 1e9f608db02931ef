"""A newcomer's first hour with the CLI (README.md, docs/getting-started.md): the rough edges
found by giving each command wrong input, each pinned here. Bad input is one line on stderr
and a non-zero exit; every option's help says what it is for."""

from __future__ import annotations

import argparse
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo
from test_cli_support import assert_ok, assert_one_error, run_cli

from jobtui.cli import GROUPS, build_parser


def _options_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _options_without_help(sub, f"{path} {name}")
        elif action.option_strings and not action.help:
            missing.append(f"{path} {action.option_strings[0]}")
    return missing


def test_every_option_says_what_it_is_for() -> None:
    """`jobtui check --help` listed --max-dead, --max-ready, --max-oldest-age and their --crit-
    pairs with no word on what they judge; `enqueue --max-attempts`, `worker --log-level`,
    `roles --print-sql` and `jobs show --json` were bare too."""
    parser = build_parser({module for module, _ in GROUPS})
    assert _options_without_help(parser, "jobtui") == []


@pytest.mark.parametrize(
    "args",
    [
        ["--refresh", "0"],  # was ignored: 0 is falsy, the config's 2s was used
        ["--refresh", "0.1s"],  # was raised to 0.5s without a word
        ["console", "--refresh", "7d"],  # was taken as is; the config file's refresh stops at 5m
        ["serve", "--refresh", "0"],  # was passed on to each session's console
    ],
)
def test_a_refresh_out_of_range_is_refused_not_changed(args: list[str]) -> None:
    cmd = f"jobtui {args[0]}" if args[0] in ("console", "serve") else "jobtui"
    assert_one_error(
        run_cli(*args, timeout=20), 2, f"{cmd}: error: argument --refresh", "0.5s to 5m"
    )


@pytest.mark.parametrize(
    "dsn", ["not a dsn", "host=127.0.0.1 nosuchoption=1", "host='127.0.0.1 dbname=x"]
)
def test_a_malformed_dsn_is_called_one_not_a_database_error(dsn: str) -> None:
    """libpq's parse error came out as `database error: missing "=" after "not" in connection
    info string`, as if the server had refused something."""
    line = assert_one_error(
        run_cli("--dsn", dsn, "jobs", "list"), 1, "invalid DSN: ", "postgresql://user@host/db"
    )
    assert "database error" not in line


def test_not_migrated_names_the_database_reached(empty_dsn: str) -> None:
    """With no --dsn and no JOBTUI_DSN, libpq's defaults pick a database (as root: `root` on
    the local socket); "jobtui's tables are not in schema 'public': run `jobtui migrate` first"
    did not say which, and invited migrating the wrong one."""
    info = conninfo.conninfo_to_dict(empty_dsn)
    assert_one_error(
        run_cli("jobs", "list", dsn=empty_dsn),
        1,
        f"not in schema 'public' of database '{info['dbname']}' on {info.get('host', '')}",
        "run `jobtui migrate` first, or give --dsn",
    )


HERE = Path(__file__).parent


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--heartbeat", "0"], "--heartbeat must be a positive number of seconds"),
        (["--heartbeat-timeout", "1s"], "--heartbeat-timeout (1.0s) must be longer than --heartb"),
        (["--retention", "0"], "--retention must be a positive duration"),
    ],
)
def test_a_worker_setting_refused_is_named_by_its_flag(
    dsn: str, flags: list[str], needle: str
) -> None:
    """The refusal named WorkerSettings' fields: `heartbeat_interval must be a positive number
    of seconds, not 0.0` for `--heartbeat 0`."""
    proc = run_cli("worker", "--app", "apps.basic", *flags, dsn=dsn, cwd=HERE, timeout=30)
    assert "_" not in assert_one_error(proc, 2, needle).split(": error: ")[1].split(" must")[0]


@pytest.mark.parametrize("kinds", ["", ",", " , "])
def test_a_worker_given_an_empty_kinds_list_is_refused(dsn: str, kinds: str) -> None:
    """`--kinds "$KINDS"` with KINDS unset started a worker of every registered kind."""
    proc = run_cli("worker", "--app", "apps.basic", "--kinds", kinds, dsn=dsn, cwd=HERE, timeout=15)
    assert_one_error(proc, 2, "--kinds names no kind")


def test_a_jobs_file_saved_with_a_byte_order_mark_is_read(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """Windows editors save UTF-8 with a BOM and CRLF line ends: the file was refused with
    `line 1: invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)`."""
    text = '\ufeff{"kind": "a", "payload": {}}\r\n{"kind": "b", "payload": {}}\r\n'
    path = tmp_path / "jobs.jsonl"
    path.write_text(text, encoding="utf-8", newline="")
    assert "enqueued 2 jobs" in assert_ok(run_cli("enqueue", "--file", str(path), dsn=dsn))
    assert "enqueued 2 jobs" in assert_ok(run_cli("enqueue", "--file", "-", dsn=dsn, input=text))
    kinds = conn.execute("SELECT kind FROM jobs ORDER BY id").fetchall()
    assert kinds == [("a",), ("b",), ("a",), ("b",)]


def test_stats_output_that_cannot_be_written_names_the_path_given(dsn: str, tmp_path: Path) -> None:
    """It named the temporary file beside it: `/nonexistent/dir/.file.f0fj76qp: No such file
    or directory`, and for a directory `/.tmp.uf1cvqrs: Is a directory`."""
    missing = tmp_path / "no" / "such.prom"
    assert_one_error(
        run_cli("stats", "--output", str(missing), dsn=dsn),
        1,
        f"--output {missing}: No such file or directory",
    )
    assert_one_error(
        run_cli("stats", "--output", str(tmp_path), dsn=dsn), 1, f"--output {tmp_path}: "
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary file left
