"""A newcomer's rough edges, round 12: settings given in the wrong place or with a wrong value.

Each was silent or unclear before (said in its test); now it is one line on stderr naming the
setting and its value, a non-zero exit, and nothing changed in the database.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo
from test_cli_support import JOBTUI, assert_ok, assert_one_error, clean_env, run_cli

from benchmarks.article import ARTICLE_DDL

HERE = Path(__file__).parent

# --- the config file's refresh: refused out of range, as --refresh is ---


@pytest.mark.parametrize("value", ['"10ms"', '"1h"', '"abc"', "0"])
def test_config_refresh_out_of_range_is_refused_as_the_flag_is(
    dsn: str, tmp_path: Path, value: str
) -> None:
    """The file's refresh was clamped without a word ("10ms" ran at 0.5 s, "1h" at 5 min)
    while `--refresh 10ms` was refused: now the commands that read the file refuse it."""
    path = tmp_path / "config.toml"
    path.write_text(f"[console]\nrefresh = {value}\n")
    needles = (str(path), "[console] refresh", "from 0.5s to 5m")
    check = run_cli("check", "--config", str(path), dsn=dsn)  # Nagios: UNKNOWN on stdout
    assert check.returncode == 3 and check.stdout.startswith("JOBTUI UNKNOWN - "), check
    assert all(n in check.stdout for n in needles), check.stdout
    env = clean_env(JOBTUI_CONFIG=str(path))
    assert_one_error(run_cli("stats", dsn=dsn, env=env), 1, *needles)


def test_console_refuses_a_config_refresh_out_of_range(dsn: str, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[console]\nrefresh = "10ms"\n')
    assert_one_error(
        run_cli("--config", str(path), dsn=dsn, timeout=20),
        1,
        f"{path}: [console] refresh: must be from 0.5s to 5m, not '10ms'",
    )


# --- libpq's environment: a bad PG* value is named ---


def _pg_env(dsn: str, **extra: str) -> dict[str, str]:
    """The test database as libpq's PGHOST/PGUSER/PGDATABASE (no --dsn), plus `extra`."""
    info = conninfo.conninfo_to_dict(dsn)
    env = {"PGHOST": str(info.get("host", "")), "PGDATABASE": str(info["dbname"])}
    if info.get("user"):
        env["PGUSER"] = str(info["user"])
    if info.get("port"):
        env["PGPORT"] = str(info["port"])
    return clean_env(**{**env, **extra})


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        # was `database error: bad value for connect_timeout: 'abc'`
        ("PGCONNECT_TIMEOUT", "abc", "bad value for connect_timeout"),
        # was `invalid DSN: invalid integer value "abc" …` (the DSN was empty)
        ("PGPORT", "abc", 'invalid integer value "abc"'),
        # was `database error: connection is bad: invalid port number: "99999"`
        ("PGPORT", "99999", "invalid port number"),
        ("PGSSLMODE", "bogus", "invalid sslmode value"),
        ("PGSERVICE", "no_such_service", "definition of service"),
    ],
)
def test_a_bad_libpq_variable_is_named_with_its_value(
    dsn: str, variable: str, value: str, said: str
) -> None:
    for args in (["stats"], ["jobs", "list"], ["worker", "--app", "apps.basic"]):
        assert_one_error(
            run_cli(*args, env=_pg_env(dsn, **{variable: value}), cwd=HERE, timeout=20),
            1,
            f"invalid connection setting in the environment, {variable}={value!r}: {said}",
            "fix or unset it",
        )


def test_a_bad_value_in_the_dsn_is_the_dsn_s_not_the_environment_s(dsn: str) -> None:
    """`?connect_timeout=abc` in --dsn said `database error: …`; and PGPORT=abc, which the
    DSN's own port overrides, is not blamed."""
    env = clean_env(PGPORT="abc")
    bad = conninfo.make_conninfo(dsn, connect_timeout="abc")
    line = assert_one_error(
        run_cli("stats", dsn=bad, env=env), 1, "invalid DSN: bad value for connect_timeout"
    )
    assert "PGPORT" not in line
    info = conninfo.conninfo_to_dict(dsn)
    assert_ok(
        run_cli("stats", dsn=conninfo.make_conninfo(dsn, port=info.get("port", 5432)), env=env)
    )


def test_an_unresolvable_pghost_is_named(dsn: str) -> None:
    """psycopg said `failed to resolve host None` when the host came from PGHOST."""
    env = _pg_env(dsn, PGHOST="no-such-host.invalid")
    assert_one_error(
        run_cli("stats", env=env, timeout=30),
        1,
        "could not connect to PostgreSQL: failed to resolve host 'no-such-host.invalid' (PGHOST)",
    )


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a server that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for s in held:
            s.close()
        listener.close()


def test_the_dsn_s_own_connect_timeout_is_used(silent_server: int) -> None:
    """jobtui's 5 s connect timeout was passed as an argument, which overrides the DSN's:
    `?connect_timeout=2` (documented in docs/operating/configuration.md) still waited 5 s, and
    `?connect_timeout=30` for a slow link gave up at 5 s."""
    started = time.monotonic()
    dsn = f"postgresql://nobody@127.0.0.1:{silent_server}/x?connect_timeout=2&sslmode=disable"
    assert_one_error(run_cli("stats", dsn=dsn), 1, "timed out")
    assert time.monotonic() - started < 4.5  # 2 s and a process start; it was 5 s and more


# --- JOBTUI_SCHEMA set but empty, or not a name ---


@pytest.mark.parametrize(
    "args", [["stats"], ["migrate"], ["jobs", "list"], ["enqueue", "k"], ["worker", "--app",
    "apps.basic"], ["console"], ["roles", "--print-sql"]],
)  # fmt: skip
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_jobtui_schema_is_refused_not_taken_as_public(
    dsn: str, args: list[str], value: str
) -> None:
    """`JOBTUI_SCHEMA=` (often `JOBTUI_SCHEMA=${QUEUE_SCHEMA}` of an unset variable) meant
    `public`: migrate created jobtui's tables there, the worker ran public's jobs. Refused now,
    as an empty JOBTUI_DSN is (exit 2), and nothing is done."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = conn.execute("SELECT count(*) FROM jobs").fetchone()
    env = clean_env(JOBTUI_SCHEMA=value)
    assert_one_error(
        run_cli(*args, dsn=dsn, env=env, cwd=HERE, timeout=20),
        2,
        "JOBTUI_SCHEMA is set but empty",
        "or unset it for public",
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == before


def test_an_empty_jobtui_schema_is_unknown_to_check(dsn: str) -> None:
    proc = run_cli("check", dsn=dsn, env=clean_env(JOBTUI_SCHEMA=""))
    assert proc.returncode == 3 and "JOBTUI_SCHEMA is set but empty" in proc.stdout, proc


def test_schema_flag_wins_over_an_empty_jobtui_schema(dsn: str) -> None:
    assert_ok(run_cli("--schema", "public", "stats", dsn=dsn, env=clean_env(JOBTUI_SCHEMA="")))


@pytest.mark.parametrize(
    ("flag", "env", "source"),
    [
        (["--schema", "1queue"], {}, "--schema"),
        ([], {"JOBTUI_SCHEMA": "my-queue"}, "JOBTUI_SCHEMA"),
    ],
)
def test_an_invalid_schema_name_says_where_it_came_from(
    dsn: str, flag: list[str], env: dict[str, str], source: str
) -> None:
    """`invalid schema name '1queue': use letters, digits and underscores` named neither the
    setting nor the rule broken (1queue is letters and digits: it starts with a digit)."""
    assert_one_error(
        run_cli(*flag, "stats", dsn=dsn, env=clean_env(**env)),
        1,
        f"{source}: invalid schema name",
        "starting with a letter or underscore",
    )


# --- migrate over an article table: the refusal's ALTER for every column it refuses ---


def _tables(conn: psycopg.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT table_schema, table_name FROM information_schema.tables"
        " WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"
    ).fetchall()


@pytest.mark.parametrize(
    ("setup", "column_type", "said"),
    [
        # NOT NULL by its domain: said `column kind is kind_t, jobtui needs text`, no ALTER
        ("CREATE DOMAIN kind_t AS text NOT NULL CHECK (value <> '')", "kind_t", "kind_t, a domain"),
        # a nullable domain: the NULLs need a value too, which was not said
        ("CREATE DOMAIN kind_t AS text", "kind_t", "allows NULL"),
        # another type: no ALTER either
        ("SELECT 1", "varchar(100) not null", "character varying(100), jobtui needs text"),
    ],
)
def test_migrate_refusing_a_column_s_type_offers_the_alter_that_fixes_it(
    empty_dsn: str, setup: str, column_type: str, said: str
) -> None:
    ddl = re.sub(r"(\n  kind +)text not null", rf"\g<1>{column_type}", ARTICLE_DDL)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(setup)
        conn.execute(ddl)
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
        before = conn.execute("SELECT * FROM jobs").fetchall()
    line = assert_one_error(
        run_cli("migrate", dsn=empty_dsn), 1, said, "nothing was changed", "ALTER TABLE public.jobs"
    )
    match = re.search(r"ALTER TABLE public\.jobs .*kind.*$", line)
    assert match, line
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _tables(conn) == [("public", "jobs")]
        assert conn.execute("SELECT * FROM jobs").fetchall() == before
        conn.execute(match[0])  # what the message says to run makes a table migrate extends
    assert "migrated schema public" in assert_ok(run_cli("migrate", dsn=empty_dsn))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod), attnotnull FROM pg_attribute"
            " WHERE attrelid = 'public.jobs'::regclass AND attname = 'kind'"
        ).fetchone()
        assert row == ("text", True)


def test_migrate_over_another_jobs_table_says_to_use_a_schema_of_its_own(empty_dsn: str) -> None:
    """An application's own `jobs` table (not the article's) was refused listing its missing
    columns, with no word on what to do: jobtui can live in a schema of its own."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE jobs (id serial PRIMARY KEY, title text NOT NULL)")
    assert_one_error(
        run_cli("migrate", dsn=empty_dsn),
        1,
        "column kind is missing",
        "nothing was changed",
        "put jobtui's tables in a schema of their own with --schema",
    )
    assert "migrated schema queue" in assert_ok(
        run_cli("--schema", "queue", "migrate", dsn=empty_dsn)
    )


# --- connection failures a newcomer meets first ---


def test_a_role_that_does_not_exist_is_an_authentication_failure(dsn: str) -> None:
    """`role "nobody_r12" does not exist` was said as `could not connect to PostgreSQL`, which
    sends people to the network; the server refused the login."""
    bad = conninfo.make_conninfo(dsn, user="nobody_r12")
    line = assert_one_error(
        run_cli("stats", dsn=bad), 1, "authentication failed: ", 'role "nobody_r12" does not exist'
    )
    assert "could not connect" not in line


def test_a_missing_database_says_what_to_do(dsn: str) -> None:
    """`database missing: … does not exist` and no word on the next step for a first run."""
    bad = conninfo.make_conninfo(dsn, dbname="no_such_db_r12")
    assert_one_error(
        run_cli("migrate", dsn=bad),
        1,
        "database missing: ",
        '"no_such_db_r12" does not exist',
        "create it, e.g. `createdb NAME`, then run `jobtui migrate`; or fix the DSN",
    )


# --- an empty filter is refused, not taken as none ---


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "list", "--kind", ""],  # listed every job
        ["jobs", "list", "--error", " "],
        ["jobs", "cancel", "--kind", ""],  # said "name job ids, a filter (--kind, …) or --all"
        ["dead", "list", "--text", ""],
        ["dead", "requeue", "--signature", ""],
    ],
)
def test_an_empty_filter_is_refused_not_dropped(dsn: str, args: list[str]) -> None:
    """`--kind "$KIND"` of an unset variable was no filter at all."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('a', '{}'), ('b', '{}')")
        before = conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    option = next(a for a in args if a.startswith("--"))
    assert_one_error(
        run_cli(*args, dsn=dsn), 2, f"argument {option}: is empty", "leave the option out"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM jobs ORDER BY id").fetchall() == before


# --- huge numbers ---


@pytest.mark.parametrize("older_than", ["999999999d", "3000000d"])
def test_prune_older_than_before_year_one_prunes_nothing(dsn: str, older_than: str) -> None:
    """`prune --older-than 999999999d` (the largest duration the parser takes) said
    `unexpected OverflowError: date value out of range`: now - older_than is before year 1."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload, finished_at)"
            " VALUES ('a', '{}', now() - interval '400 days')"
        )
    assert "pruned 0 finished jobs" in assert_ok(
        run_cli("prune", "--older-than", older_than, dsn=dsn)
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


def test_worker_concurrency_beyond_what_its_row_stores_is_refused(dsn: str) -> None:
    """`--concurrency 99999999999` started, then failed with `database error: integer out of
    range` writing its `workers` row."""
    proc = run_cli(
        "worker", "--app", "apps.basic", "--concurrency", "99999999999", dsn=dsn, cwd=HERE
    )
    assert_one_error(proc, 2, "--concurrency must be from 1 to 2147483647, not 99999999999")


def test_worker_retention_before_year_one_prunes_nothing_and_logs_no_failure(
    dsn: str, conn: psycopg.Connection
) -> None:
    """`--retention 999999999d` (a way to say "never") made the prune chore fail each time
    with `chore_skipped chore=prune error=database error: timestamp out of range`."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at) VALUES ('quick', '{}', now() - interval"
        " '400 days'), ('quick', '{}', NULL)"
    )
    conn.execute("UPDATE jobs SET attempts = max_attempts WHERE finished_at IS NULL")  # exhausted
    proc = subprocess.Popen(
        [*JOBTUI, "worker", "--app", "apps.basic", "--dsn", dsn, "--retention", "999999999d",
         "--log-level", "warning"],
        cwd=HERE, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the sweep buries it in the round that prunes
            row = conn.execute("SELECT count(*) FROM dead_letters").fetchone()
            if row and row[0]:
                break
            time.sleep(0.1)
        assert row and row[0] == 1
        time.sleep(2)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "chore=prune" not in err and "out of range" not in err, err
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


@pytest.mark.parametrize(
    ("flags", "env", "said"),
    [
        (["--listen-dsn", ""], {}, "--listen-dsn is empty"),
        ([], {"JOBTUI_LISTEN_DSN": " "}, "JOBTUI_LISTEN_DSN is set but empty"),
    ],
)
def test_an_empty_listen_dsn_is_refused(
    dsn: str, flags: list[str], env: dict[str, str], said: str
) -> None:
    """An empty --listen-dsn or JOBTUI_LISTEN_DSN (`$(cat FILE)` of a missing file) quietly
    LISTENed through --dsn: the transaction pooler it was given to avoid."""
    proc = run_cli(
        "worker", "--app", "apps.basic", *flags, dsn=dsn, env=clean_env(**env), cwd=HERE, timeout=20
    )
    assert_one_error(proc, 2, said)


# --- serve: where it cannot listen ---


def test_serve_on_a_port_in_use_says_so_without_printing_a_url(dsn: str) -> None:
    """The banner (`jobtui serve: http://127.0.0.1:PORT/ …`) was printed before aiohttp bound,
    then `jobtui: error: error while attempting to bind on address ('127.0.0.1', PORT): address
    already in use`: a URL that did not work, and an error naming no option."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run_cli("serve", "--port", str(port), dsn=dsn, timeout=20)
    assert_one_error(proc, 1, f"cannot listen on --host 127.0.0.1 --port {port}: ", "in use")
    assert proc.stdout == ""


def test_serve_on_a_host_that_does_not_resolve_says_so(dsn: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("me:0123456789abcdef0123456789abcdef\n")
    tokens.chmod(0o600)
    proc = run_cli(
        "serve", "--host", "no-such-host.invalid", "--token-file", str(tokens), dsn=dsn, timeout=30
    )
    assert_one_error(proc, 1, "--host no-such-host.invalid", "the host does not resolve")
    assert proc.stdout == ""


# --- a mistyped command ---


@pytest.mark.parametrize(
    ("args", "near"),
    [(["stat"], "stats"), (["job", "list"], "jobs"), (["jobs", "lst"], "list"),
     (["dead", "reqeue", "1"], "requeue")],
)  # fmt: skip
def test_a_mistyped_command_names_the_nearest_one(args: list[str], near: str) -> None:
    """argparse listed every choice and left the reader to find the one meant."""
    assert_one_error(run_cli(*args), 2, "invalid choice", f"did you mean {near!r}?")


def test_a_choice_far_from_every_command_gets_no_guess() -> None:
    line = assert_one_error(run_cli("frobnicate"), 2, "invalid choice: 'frobnicate'")
    assert "did you mean" not in line


@pytest.mark.parametrize(
    ("args", "near"),
    [(["jobs", "list", "--kidn", "x"], "--kind"), (["stats", "--jsno"], "--json"),
     (["jobs", "list", "--limt=3"], "--limit")],
)  # fmt: skip
def test_a_mistyped_option_names_the_nearest_one(args: list[str], near: str) -> None:
    """`jobs list --kidn x` said only `unrecognized arguments: --kidn x`."""
    assert_one_error(run_cli(*args), 2, "unrecognized arguments", f"did you mean {near!r}?")


# --- the config file named but empty ---


def _default_config_refused_if_read(tmp_path: Path) -> dict[str, str]:
    """An environment whose default config file (XDG_CONFIG_HOME) is refused when read."""
    (tmp_path / "jobtui").mkdir()
    (tmp_path / "jobtui" / "config.toml").write_text('[console]\nrefresh = "10ms"\n')
    return {"XDG_CONFIG_HOME": str(tmp_path)}


@pytest.mark.parametrize("args", [["--config", "", "stats"], ["stats", "--config", " "]])
def test_an_empty_config_option_is_refused(dsn: str, args: list[str]) -> None:
    """`--config "$CFG"` of an unset variable read the default file instead."""
    assert_one_error(run_cli(*args, dsn=dsn), 2, "argument --config: is empty")


def test_an_empty_jobtui_config_is_refused_not_the_default_file(dsn: str, tmp_path: Path) -> None:
    """`JOBTUI_CONFIG=` silently read ~/.config/jobtui/config.toml (here one that would be
    refused for its refresh, to tell which file was read): not the file meant, which may hold
    the read_only = true or the targets the operator relied on."""
    env = clean_env(JOBTUI_CONFIG="", **_default_config_refused_if_read(tmp_path))
    assert_one_error(run_cli("stats", dsn=dsn, env=env), 1, "JOBTUI_CONFIG is set but empty")
    check = run_cli("check", dsn=dsn, env=env)
    assert check.returncode == 3 and "JOBTUI_CONFIG is set but empty" in check.stdout, check
