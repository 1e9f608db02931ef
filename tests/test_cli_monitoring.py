"""`jobtui stats` (text, JSON, Prometheus) and `jobtui check` (Nagios exit codes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from test_cli_support import assert_ok, run_cli

# The Prometheus text exposition format, strictly: comments are HELP/TYPE, samples are
# name{label="value",…} value, every sample belongs to the family declared just before it.
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_HELP = re.compile(rf"^# HELP ({_NAME}) (.+)$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"'
_SAMPLE = re.compile(
    rf"^({_NAME})(?:\{{({_LABEL}(?:,{_LABEL})*)?\}})? "
    r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|NaN|[+-]Inf))(?: -?\d+)?$"
)


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Validate `text` and return {(name, labels): value}; raises AssertionError when invalid."""
    assert text.endswith("\n"), "exposition must end with a newline"
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    family: str | None = None
    typed: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if m := _HELP.match(line):
            family = m.group(1)
            continue
        if m := _TYPE.match(line):
            assert m.group(1) == family, f"line {n}: TYPE for another family"
            assert family not in typed, f"line {n}: family {family} declared twice"
            typed.add(family)
            continue
        assert not line.startswith("#"), f"line {n}: stray comment {line!r}"
        m = _SAMPLE.match(line)
        assert m, f"line {n}: not a sample: {line!r}"
        assert m.group(1) == family, f"line {n}: sample outside its family"
        labels = tuple(
            re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or "")
        )
        key = (m.group(1), labels)
        assert key not in samples, f"line {n}: duplicate sample"
        samples[key] = float(m.group(3))
    return samples


def _fill(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'send_email', '{}', "
        "now() - interval '20 minutes' FROM generate_series(1, 5)"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at)"
        " VALUES ('report \"q\"', '{}', now() + interval '1 hour')"
    )
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                                     last_error, errors, reason)
           SELECT nextval('jobs_id_seq'), 'export_crm', %s, 3, 3, now(), now(), 'E: x', '[]',
                  'failed'
           FROM generate_series(1, 3)""",
        (Jsonb({}),),
    )


def test_stats_text_json_and_prometheus(dsn: str, conn: psycopg.Connection, tmp_path: Path) -> None:
    _fill(conn)
    out = assert_ok(run_cli("stats", dsn=dsn))
    assert out.startswith("ready 5  scheduled 1")
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
    assert {
        "taken_at",
        "totals",
        "oldest_ready_age_s",
        "done_per_min",
        "failure_rate",
        "kinds",
        "history",
        "workers",
        "paused",
    } <= set(data)
    assert data["totals"]["ready"] == 5 and data["totals"]["dead"] == 3
    assert 1190 <= data["oldest_ready_age_s"] <= 1300
    assert {k["kind"] for k in data["kinds"]} >= {"send_email", "export_crm"}
    samples = parse_prometheus(assert_ok(run_cli("stats", "--prometheus", dsn=dsn)))
    assert samples[("jobtui_jobs", (("state", "ready"),))] == 5
    assert samples[("jobtui_jobs", (("state", "dead"),))] == 3
    assert samples[("jobtui_kind_jobs", (("kind", "send_email"), ("state", "ready")))] == 5
    assert samples[("jobtui_kind_jobs", (("kind", 'report \\"q\\"'), ("state", "scheduled")))] == 1
    assert 1190 <= samples[("jobtui_oldest_ready_age_seconds", ())] <= 1300
    target = tmp_path / "jobtui.prom"
    assert assert_ok(run_cli("stats", "--prometheus", "--output", str(target), dsn=dsn)) == ""
    parse_prometheus(target.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["jobtui.prom"]


def test_prometheus_of_an_empty_queue_parses(dsn: str) -> None:
    samples = parse_prometheus(assert_ok(run_cli("stats", "--prometheus", dsn=dsn)))
    assert samples[("jobtui_oldest_ready_age_seconds", ())] == 0


def test_the_validator_rejects_broken_text() -> None:
    with pytest.raises(AssertionError):
        parse_prometheus('# HELP a x\n# TYPE a gauge\na{state="x} 1\n')
    with pytest.raises(AssertionError):
        parse_prometheus("# HELP a x\n# TYPE a gauge\nb 1\n")


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        # No flags: the config file's alert rules, here the built-in ones (deliberately changed
        # by issue 12 item 4; before, `check` alone checked nothing): a 20-minute-old ready
        # job, dead letters and a kind no worker handles each warn.
        ([], 1, "WARNING"),
        (["--max-ready", "5"], 0, "OK"),
        (["--max-ready", "4"], 1, "WARNING"),
        (["--max-ready", "2"], 2, "CRITICAL"),
        (["--max-ready", "4", "--crit-ready", "10"], 1, "WARNING"),
        (["--max-dead", "3"], 0, "OK"),
        (["--max-dead", "2"], 1, "WARNING"),
        (["--max-dead", "0"], 2, "CRITICAL"),
        (["--max-oldest-age", "30m"], 0, "OK"),
        (["--max-oldest-age", "15m"], 1, "WARNING"),
        (["--max-oldest-age", "5m"], 2, "CRITICAL"),
        (["--max-oldest-age", "5m", "--crit-oldest-age", "1h"], 1, "WARNING"),
        (["--max-ready", "4", "--max-dead", "0"], 2, "CRITICAL"),
    ],
)
def test_check_exit_codes(
    dsn: str, conn: psycopg.Connection, args: list[str], code: int, status: str
) -> None:
    _fill(conn)
    proc = run_cli("check", *args, dsn=dsn)
    assert proc.returncode == code, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"JOBTUI {status} - "), proc.stdout
    assert " | oldest_ready_age=" in lines[0]
    assert proc.stderr == ""
    if code:  # the first line counts the problems; one line each follows, naming its rule
        assert len(lines) > 1
        for detail in lines[1:]:
            assert detail.startswith(("WARNING: ", "CRITICAL: ")), detail
            assert detail.endswith(("[oldest_ready]", "[dead_letters]", "[ready]", "[no_worker]"))
    else:
        assert len(lines) == 1
    if not args:
        # The console's alarm order (issue 26): what stops work first, so "no worker" leads.
        assert "[no_worker]" in lines[0] and "[no_worker]" in lines[1]
        assert "send_email: oldest ready job 20m" in proc.stdout and "[oldest_ready]" in lines[2]
        assert "export_crm: dead letters 3 > 0 [dead_letters]" in proc.stdout
        assert "send_email: no live worker handles it (5 ready) [no_worker]" in proc.stdout


def test_check_unknown(empty_dsn: str) -> None:
    for dsn, needle in (
        ("postgresql://nobody@127.0.0.1:1/x", "could not connect"),
        (empty_dsn, "run `jobtui migrate`"),
    ):
        proc = run_cli("check", "--max-dead", "0", dsn=dsn)
        assert proc.returncode == 3
        assert proc.stdout.startswith("JOBTUI UNKNOWN - ") and needle in proc.stdout
        assert len(proc.stdout.splitlines()) == 1 and "Traceback" not in proc.stderr
    for bad in (["--max-dead", "many"], ["--no-such-flag"]):
        proc = run_cli("check", *bad)
        assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1, proc.stderr
    proc = run_cli("check", "--max-dead", "5", "--crit-dead", "1", dsn=empty_dsn)
    assert proc.returncode == 3 and "below" in proc.stdout


def test_stats_shows_each_workers_abandoned_threads_outcome_errors_and_wakeup(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Issue 9 leftovers: what a worker holds, what it could not write, how it is woken."""
    conn.execute(
        """INSERT INTO workers (id, host, pid, kinds, concurrency, abandoned, outcome_errors,
               last_outcome_error, wakeup_mode, wakeup_note, listen_connected, poll_interval_s)
           VALUES ('w-poll', 'h', 1, '{mail}', 4, 2, 5,
                   'insert or update on table "dead_letters" violates constraint',
                   'polling', 'behind a transaction pooler; no --listen-dsn', false, 0.25),
                  ('w-listen', 'h', 2, '{mail}', 4, 0, 0, NULL, 'listen', NULL, true, 1)"""
    )
    text = assert_ok(run_cli("stats", dsn=dsn))
    (poll_line,) = [line for line in text.splitlines() if line.startswith("w-poll ")]
    assert " 2 " in poll_line and " 5 " in poll_line
    assert "polling every 0.25s (behind a transaction pooler; no --listen-dsn)" in poll_line
    (listen_line,) = [line for line in text.splitlines() if line.startswith("w-listen ")]
    assert listen_line.rstrip().endswith("listen")
    assert 'last outcome error on w-poll: insert or update on table "dead_letters"' in text
    assert "bundled worker only" in text

    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
    by_id = {w["id"]: w for w in data["workers"]}
    assert by_id["w-poll"]["abandoned"] == 2 and by_id["w-poll"]["outcome_errors"] == 5
    assert by_id["w-poll"]["wakeup_mode"] == "polling"
    assert data["throughput_source"] == "bundled worker only" and data["replica"] is None

    samples = parse_prometheus(assert_ok(run_cli("stats", "--prometheus", dsn=dsn)))
    assert samples[("jobtui_worker_abandoned_threads", (("worker", "w-poll"),))] == 2
    assert samples[("jobtui_worker_outcome_errors", (("worker", "w-poll"),))] == 5
    assert samples[("jobtui_worker_polling", (("worker", "w-poll"),))] == 1
    assert samples[("jobtui_worker_polling", (("worker", "w-listen"),))] == 0
    assert samples[("jobtui_is_replica", ())] == 0


def test_exhausted_rows_are_not_ready_in_stats_or_check(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, max_attempts, run_at) "
        "SELECT 'legacy', '{}', 1, 1, now() - interval '1 h' FROM generate_series(1, 3)"
    )
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
    assert (data["totals"]["ready"], data["totals"]["exhausted"]) == (0, 3)
    proc = run_cli("check", "--max-ready", "0", "--max-oldest-age", "1m", dsn=dsn)
    assert proc.returncode == 0, proc.stdout
    assert "exhausted 3" in proc.stdout


def test_worker_and_limit_text_from_the_database_is_printed_inert(
    dsn: str, conn: psycopg.Connection
) -> None:
    evil = "\x1b]52;c;cGF3bmVk\x07\x1b[2Jboom"
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, outcome_errors,"
        " last_outcome_error, wakeup_mode, wakeup_note)"
        " VALUES (%s, 'h', 1, '{x}', 1, 1, %s, 'polling', %s)",
        (f"w{evil}", f"E: {evil}\nsecond line", evil),
    )
    conn.execute(
        "INSERT INTO kind_limits (kind, overridden, override_concurrency, overridden_by)"
        " VALUES (%s, true, 2, %s)",
        (f"k{evil}", evil),
    )
    for args in (("stats",), ("kinds", "list"), ("kinds", "limit", f"k{evil}", "--clear")):
        text = assert_ok(run_cli(*args, dsn=dsn))
        assert "\x1b" not in text and "\x07" not in text, (args, text)
        assert "boom" in text or (args[0] == "kinds" and "no limits" in text), text


def test_stats_carries_the_database_tab_figures_in_every_format(dsn: str) -> None:
    """Issue 12: the Database tab's figures are in `stats --json`, Prometheus and the text,
    with a real open transaction as the vacuum blocker."""
    holder = psycopg.connect(dsn)
    holder.execute("SELECT txid_current()")  # an open transaction with an xid
    try:
        pid = holder.info.backend_pid
        data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
        assert data["database"]["blocker"]["pid"] == pid
        assert data["database"]["connections"]["in_use"] >= 2
        prom = assert_ok(run_cli("stats", "--prometheus", dsn=dsn))
        assert re.search(r"^jobtui_db_blocker_xact_age_seconds [0-9.e+-]+$", prom, re.M)
        assert re.search(r'^jobtui_db_table_dead_tuples\{table="jobs"\} ', prom, re.M)
        text = assert_ok(run_cli("stats", dsn=dsn))
        assert f"oldest transaction holding back vacuum: pid {pid}" in text
    finally:
        holder.close()


def test_stats_text_says_what_each_worker_was_asked_and_whether_it_acted(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The CONTROL column: the console's words (jobtui.control_state.control_text), from the
    request an operator set and what the worker wrote back; `–` when nothing was asked."""
    expected = {
        "w-none": (None, None, "–"),
        "w-quiet-asked": ("quiet", None, "quiet asked"),
        "w-quiet": ("quiet", "quiet", "quiet"),
        "w-resume-asked": (None, "quiet", "resume asked"),
        "w-stop-asked": ("stop", None, "stop asked"),
        "w-stopping": ("stop", "stop", "stopping"),
        "w-by-cli": (None, None, "quiet asked"),  # quieted below through `jobtui workers`
    }
    for wid, (control, applied, _) in expected.items():
        conn.execute(
            "INSERT INTO workers (id, host, pid, kinds, concurrency, control, control_applied)"
            " VALUES (%s, 'h', 1, '{mail}', 4, %s, %s)",
            (wid, control, applied),
        )
    assert_ok(run_cli("workers", "quiet", "w-by-cli", dsn=dsn))
    lines = assert_ok(run_cli("stats", dsn=dsn)).splitlines()
    (header,) = [line for line in lines if line.startswith("WORKER ")]
    start = header.index("CONTROL")
    end = header.index("EVERY/TIMEOUT")
    got = {
        line.split()[0]: line[start:end].strip()
        for line in lines
        if line.split() and line.split()[0] in expected
    }
    assert got == {wid: text for wid, (_, _, text) in expected.items()}
