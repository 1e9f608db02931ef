"""Faults found attacking the newcomer edges of round 12 (tests/test_cli_r12_edges.py).

Each test fails on main at 53d8617 and says what it did there.
"""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo
from test_cli_support import assert_ok, assert_one_error, clean_env, run_cli

from benchmarks.article import ARTICLE_DDL
from jobtui import web
from jobtui.cli.args import _did_you_mean
from jobtui.jobspec import InvalidJob, JobSpec

# --- migrate's ALTER hint, run as printed on a real article table ---


@pytest.mark.parametrize(
    ("column", "article", "mine"),
    [
        # ERROR: default for column "payload" cannot be cast automatically to type jsonb
        ("payload", "payload      jsonb not null", "payload      text not null default '{}'"),
        # a serial: ALTER … TYPE bigint left its sequence an integer one (max 2147483647)
        ("id", "id           bigserial primary key", "id           serial primary key"),
    ],
)
def test_the_printed_alter_extends_an_article_table(
    empty_dsn: str, column: str, article: str, mine: str
) -> None:
    assert article in ARTICLE_DDL
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL.replace(article, mine))
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{\"a\": 1}')")
    line = assert_one_error(
        run_cli("migrate", dsn=empty_dsn), 1, f"column {column} is", "run ALTER TABLE public.jobs"
    )
    statements = re.search(r"run (ALTER TABLE public\.jobs .*)$", line)
    assert statements, line
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for sql in statements[1].split("; "):
            conn.execute(sql)  # what the message says to run
    assert "migrated schema public" in assert_ok(run_cli("migrate", dsn=empty_dsn))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        if column == "payload":  # the default kept its meaning
            row = conn.execute("INSERT INTO jobs (kind) VALUES ('k') RETURNING payload").fetchone()
            assert row == ({},)
        else:  # ids go on past int4
            conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 3000000000)")
            row = conn.execute(
                "INSERT INTO jobs (kind, payload) VALUES ('k', '{}') RETURNING id"
            ).fetchone()
            assert row == (3000000001,)


# --- `jobtui enqueue`'s mistakes: usage errors (exit 2) naming the range or the fix ---


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # exit 1, as a database failure, where argparse's own mistakes exit 2
        ((), "give a job KIND"),
        # exit 1 while `--delay nope` exited 2
        (("k", "--run-at", "nope"), "argument --run-at: 'nope' is not an ISO 8601 time"),
        (("k", "--run-at", "2030-01-01T00:00"), "argument --run-at: '2030-01-01T00:00' has no UTC"),
        # exit 1, `priority 99999999999999999999 is out of range`, without the range
        (("k", "--priority", "99999999999999999999"), "expected -2147483648 to 2147483647"),
        # taken as 10 by int()
        (("k", "--priority", "1_0"), "argument --priority: expected a whole number"),
        # exit 1, `max_attempts 99999999999 is out of range`
        (("k", "--max-attempts", "99999999999"), "expected at most 2147483647, not 99999999999"),
        # said only `unrecognized arguments: --payload {}`
        (("k", "--payload", "{}"), "PAYLOAD_JSON is positional: give it without --payload"),
    ],
)
def test_enqueue_mistakes_are_usage_errors_that_say_the_fix(
    dsn: str, args: tuple[str, ...], said: str
) -> None:
    assert_one_error(run_cli("enqueue", *args, dsn=dsn), 2, said)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_file_line_s_run_at_that_is_not_a_string_is_named(dsn: str, tmp_path: Path) -> None:
    """`{"run_at": 5}` said `unexpected AttributeError: 'int' object has no attribute 'tzinfo'`."""
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"kind": "k", "run_at": 5}\n')
    assert_one_error(
        run_cli("enqueue", "--file", str(path), dsn=dsn),
        1,
        f"{path}: line 1: run_at: expected an ISO 8601 time as a string, not 5",
    )


def test_the_api_s_range_refusals_say_the_range() -> None:
    with pytest.raises(InvalidJob, match=r"priority must be from -2147483648 to 2147483647"):
        JobSpec(kind="k", priority=2**31).validated()
    with pytest.raises(InvalidJob, match=r"max_attempts must be at most 2147483647"):
        JobSpec(kind="k", max_attempts=2**31).validated()


# --- typo suggestions: no guess of an unrelated option ---


@pytest.mark.parametrize(
    ("args", "wrong"),
    [
        # `--ids` was taken for `--dsn`: the `--` both share made them look alike
        (("jobs", "show", "3", "--ids"), "--dsn"),
        (("jobs", "list", "--db", "x"), "--debug"),
    ],
)
def test_a_stray_option_is_not_taken_for_an_unrelated_one(
    args: tuple[str, ...], wrong: str
) -> None:
    line = assert_one_error(run_cli(*args), 2, "unrecognized arguments")
    assert wrong not in line, line


def test_two_swapped_letters_still_name_the_option() -> None:
    assert_one_error(run_cli("stats", "--dns", "x"), 2, "did you mean '--dsn'?")


# --- serve's up-front listen check: as aiohttp (asyncio) binds ---


def test_listen_check_on_ipv6_any_is_not_refused_by_a_v4_listener() -> None:
    """`serve --host ::` while another process listens on 0.0.0.0:PORT: asyncio binds `::`
    IPv6-only and serves, but the probe bound it dual-stack and refused it ("address already
    in use")."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        web.check_listen("::", port)

        async def serve() -> None:  # what aiohttp does with the same host and port
            server = await asyncio.get_running_loop().create_server(asyncio.Protocol, "::", port)
            server.close()
            await server.wait_closed()

        asyncio.run(serve())


# --- libpq's environment: a bad value is pinned on the variable that set it ---


def test_a_service_file_s_bad_value_is_not_pinned_on_a_pg_variable(
    dsn: str, tmp_path: Path
) -> None:
    """A service's port comes before PGPORT's, yet `PGPORT='abc': invalid integer value "xyz"`
    named PGPORT for the service file's port=xyz."""
    services = tmp_path / "pg_service.conf"
    services.write_text("[bad]\nport=xyz\n")
    env = clean_env(PGSERVICEFILE=str(services), PGPORT="abc")
    params = {k: v for k, v in conninfo.conninfo_to_dict(dsn).items() if k != "port"}
    line = assert_one_error(
        run_cli("stats", dsn=conninfo.make_conninfo("", **params, service="bad"), env=env),
        1,
        "invalid DSN or its service 'bad': ",
        'invalid integer value "xyz"',
    )
    assert "PGPORT" not in line


# --- a target's own connect timeout, for the commands that act on one database ---


def test_a_one_database_command_on_a_target_gives_up_at_its_timeout(tmp_path: Path) -> None:
    """`stats --target` gave up at the target's timeout, `jobs list --target` did not: with the
    target's DSN saying connect_timeout=0 it waited psycopg's 130 s (the run below is cut at
    40 s), since 53d8617 honours a DSN's connect_timeout. A server that takes the connection
    and never answers: a socket that listens and never accepts."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        config = tmp_path / "config.toml"
        config.write_text(
            "[targets.silent]\n"
            f'dsn = "postgresql://u@127.0.0.1:{port}/db?connect_timeout=0&sslmode=disable"\n'
            'timeout = "2s"\n'
        )
        proc = run_cli(
            "jobs", "list", "--target", "silent", env=clean_env(JOBTUI_CONFIG=str(config)),
            timeout=40,
        )  # fmt: skip
    assert_one_error(proc, 1, "could not connect: timed out")


# --- a mistyped command, as newer Pythons word argparse's refusal ---


@pytest.mark.parametrize(
    "choices",
    [
        "'console', 'stats', 'jobs'",  # Python 3.11 and up to 3.12.6: repr
        "console, stats, jobs",  # 3.12.7+ and 3.13 print str() (gh-117766): no guess was made
    ],
)
def test_the_nearest_command_is_named_whichever_way_argparse_lists_the_choices(
    choices: str,
) -> None:
    message = f"argument COMMAND: invalid choice: 'stat' (choose from {choices})"
    assert _did_you_mean(message) == f"{message}; did you mean 'stats'?"


# --- a DSN given where none is taken: argparse quoted it whole, password and all ---


@pytest.mark.parametrize(
    "args",
    [
        ("stats", "--dns", "postgresql://u:s3cret-pw@db.example/q"),  # the typo now guessed
        ("stats", "--dns=postgresql://u:s3cret-pw@db.example/q"),
        ("stats", "postgresql://u:s3cret-pw@db.example/q"),  # --dsn left out
        ("postgresql://u:s3cret-pw@db.example/q",),  # taken for the command
        ("jobs", "list", "--limit", "host=db password=s3cret-pw"),
    ],
)
def test_a_usage_error_never_prints_a_password(args: tuple[str, ...]) -> None:
    line = assert_one_error(run_cli(*args), 2)
    assert "s3cret-pw" not in line and "***" in line, line
