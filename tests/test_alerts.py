"""Issue 12 item 4: one set of alert rules, the same verdict in the console, `check` and
Prometheus for the same data in a real database."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from test_cli_monitoring import parse_prometheus
from test_cli_support import assert_ok, run_cli
from textual.app import App, ComposeResult

from jobtui import alerts, metrics
from jobtui.alerts import QUEUE, AlertRules, Level, Threshold, Verdict
from jobtui.cli.monitoring import Section, drain_section, render
from jobtui.console_config import ConfigError, ConsoleConfig, load_console_config
from jobtui.models import KindFigures, Snapshot, StateCounts
from jobtui.tui.widgets.alarms import AlarmList

ALARMS_TCSS = Path(alerts.__file__).parent / "tui" / "widgets" / "alarms.tcss"

CONFIG = """
[alerts]
oldest_ready = { warn = "10m", crit = "30m" }
failure_rate = { warn = 0.1, crit = "30%" }

[alerts.kinds."glob:export_*"]
dead_letters = { warn = 0, crit = 2 }

[alerts.kinds.report]
oldest_ready = false

[alerts.queue]
ready = { warn = 5, crit = 100 }
"""

# What the incident below must fire under CONFIG, and nothing else.
EXPECTED = {
    ("oldest_ready", "send_email"): Level.CRIT,  # 40 minutes > 30m
    ("dead_letters", "export_crm"): Level.CRIT,  # 3 > 2 (the export_* override)
    ("failure_rate", "flaky"): Level.CRIT,  # 4 of 10 attempts failed: 40% > 30%
    ("no_worker", "orphan"): Level.WARN,  # 2 ready jobs, no worker handles the kind
    ("ready", QUEUE): Level.WARN,  # 7 ready jobs in all > 5
}


def _incident(conn: psycopg.Connection) -> None:
    """Old ready jobs, dead letters, a kind no worker handles, failures in kind_stats, and a
    kind whose 2-hour-old job is exempt from the age rule."""
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency)"
        " VALUES ('w1', 'h', 1, '{send_email,export_crm,flaky,report}', 4)"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'send_email', '{}',"
        " now() - interval '40 minutes' FROM generate_series(1, 4)"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'orphan', '{}',"
        " now() - interval '1 minute' FROM generate_series(1, 2)"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('report', '{}', now() - interval '2 h')"
    )
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'export_crm', '{}', 3, 3,
                  now(), now(), 'E: x', 'failed'
           FROM generate_series(1, 3)"""
    )
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed)"
        " VALUES (date_trunc('minute', now()) - interval '1 minute', 'flaky', 6, 4)"
    )


def _config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def _console_snapshot(dsn: str) -> Snapshot:
    """The snapshot the console takes (its Overview pane's load call)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        return await metrics.snapshot(
            aconn, "public", heartbeat_timeout=ConsoleConfig().heartbeat_timeout_s
        )


async def _console_verdicts(dsn: str, rules: AlertRules) -> list[Verdict]:
    return alerts.assess(await _console_snapshot(dsn), rules)


def _check_firing(output: str) -> set[tuple[str, str]]:
    """(rule, kind) of each problem in `check`'s output (one line per problem after the
    status line)."""
    found = set()
    for line in output.splitlines()[1:]:
        problem = line.split(": ", 1)[1]
        text, rule = problem.rsplit(" [", 1)
        kind = text.split(": ", 1)[0] if ": " in text else QUEUE
        found.add((rule.rstrip("]"), kind))
    return found


def _prometheus_alerts(text: str) -> dict[tuple[str, str], tuple[float, float]]:
    """{(rule, kind): (jobtui_alert, jobtui_alert_level)} from `stats --prometheus`."""
    samples = parse_prometheus(text)
    found = {
        (dict(lbl)["rule"], dict(lbl)["kind"]): (value, samples[("jobtui_alert_level", lbl)])
        for (name, lbl), value in samples.items()
        if name == "jobtui_alert"
    }
    assert found, "no jobtui_alert samples"
    return found


class AlarmApp(App[None]):
    CSS_PATH = str(ALARMS_TCSS)

    def compose(self) -> ComposeResult:
        yield AlarmList(id="alarms")


async def _alarm_lines(firings: list[Verdict], size: tuple[int, int] = (80, 24)) -> list[str]:
    app = AlarmApp()
    async with app.run_test(size=size) as pilot:
        alarms = app.query_one(AlarmList)
        assert not alarms.display and alarms.region.height == 0
        alarms.show(firings)
        await pilot.pause()
        assert alarms.display == bool(firings)
        if firings:
            assert alarms.region.height >= 1 and alarms.region.y == 0
        return alarms.content.plain.splitlines() if firings else []


async def test_one_verdict_in_the_console_check_and_prometheus(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    _incident(conn)
    path = _config(tmp_path)
    rules = load_console_config(path).alerts

    snap = await _console_snapshot(dsn)
    verdicts = alerts.assess(snap, rules)
    firings = alerts.evaluate(snap, rules)
    console = {(v.rule, v.kind): v.level for v in firings}
    assert console == EXPECTED, console
    assert firings == [v for v in verdicts if v.firing]

    proc = run_cli("check", "--config", str(path), dsn=dsn)
    assert proc.returncode == 2 and proc.stderr == "", (proc.stdout, proc.stderr)
    line = proc.stdout
    assert line.startswith("JOBTUI CRITICAL - 3 critical, 2 warning: send_email: "), line
    assert _check_firing(line) == set(EXPECTED), line
    assert "send_email: oldest ready job 40m" in line and "> 30m00s [oldest_ready]" in line
    assert "orphan: no live worker handles it (2 ready) [no_worker]" in line
    assert "flaky: failure rate 40% > 30% [failure_rate]" in line
    assert "\nWARNING: ready jobs 7 > 5 [ready]" in line and "ready=7;5;100;0;" in line

    prom = _prometheus_alerts(
        assert_ok(run_cli("stats", "--prometheus", "--config", str(path), dsn=dsn))
    )
    assert {key for key, (firing, _) in prom.items() if firing == 1} == set(EXPECTED)
    assert {key: Level(int(level)) for key, (_, level) in prom.items() if level} == EXPECTED
    # Every rule x kind judged is listed, firing or not: the same list the console judged.
    assert set(prom) == {(v.rule, v.kind) for v in verdicts}
    assert prom[("oldest_ready", "orphan")] == (0, 0)
    assert ("oldest_ready", "report") not in prom  # switched off for that kind

    data = json.loads(assert_ok(run_cli("stats", "--json", "--config", str(path), dsn=dsn)))
    assert {(a["rule"], a["kind"]) for a in data["alerts"] if a["firing"]} == set(EXPECTED)
    assert all({"arrived_per_min", "drain_s", "not_draining"} <= set(k) for k in data["kinds"])
    text = assert_ok(run_cli("stats", "--config", str(path), dsn=dsn))
    assert "\nalerts firing:\n  CRIT  send_email: oldest ready job 40m" in text
    assert "  WARN  orphan: no live worker handles it (2 ready) [no_worker]" in text

    lines = await _alarm_lines(firings)
    assert len(lines) == 3, lines  # three lines, then how many more
    assert [ln[:6] for ln in lines[:2]] == ["✗ CRIT", "✗ CRIT"]
    assert lines[0].startswith("✗ CRIT send_email: oldest ready job 40m") and lines[0].endswith(
        "[oldest_ready]"
    ), lines
    assert lines[2] == "… and 3 more alarms (1 critical)", lines


async def test_the_verdicts_follow_the_data_everywhere(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """A worker for the orphan kind, the dead letters requeued: those alarms stop in all three."""
    _incident(conn)
    path = _config(tmp_path)
    conn.execute("UPDATE workers SET kinds = kinds || '{orphan}'::text[]")
    conn.execute("DELETE FROM dead_letters")
    rules = load_console_config(path).alerts
    expected = {k: v for k, v in EXPECTED.items() if k[0] not in {"no_worker", "dead_letters"}}
    console = {(v.rule, v.kind): v.level for v in await _console_verdicts(dsn, rules) if v.firing}
    assert console == expected
    line = run_cli("check", "--config", str(path), dsn=dsn).stdout
    assert _check_firing(line) == set(expected), line
    prom = _prometheus_alerts(
        assert_ok(run_cli("stats", "--prometheus", "--config", str(path), dsn=dsn))
    )
    assert {key for key, (firing, _) in prom.items() if firing} == set(expected)
    assert prom[("no_worker", "orphan")] == (0, 0)


async def test_the_defaults_fire_the_same_everywhere(dsn: str, conn: psycopg.Connection) -> None:
    """No config file: the built-in rules (the console's old colours) in every surface."""
    _incident(conn)
    rules = load_console_config(env={"XDG_CONFIG_HOME": "/nonexistent"}).alerts
    console = {(v.rule, v.kind): v.level for v in await _console_verdicts(dsn, rules) if v.firing}
    assert console == {
        ("oldest_ready", "send_email"): Level.CRIT,
        ("oldest_ready", "report"): Level.CRIT,
        ("failure_rate", "flaky"): Level.CRIT,  # 40% > the default crit, 30%
        ("dead_letters", "export_crm"): Level.WARN,
        ("no_worker", "orphan"): Level.WARN,
    }
    proc = run_cli("check", dsn=dsn)
    assert proc.returncode == 2
    assert _check_firing(proc.stdout.strip()) == set(console)
    prom = _prometheus_alerts(assert_ok(run_cli("stats", "--prometheus", dsn=dsn)))
    assert {k: Level(int(lv)) for k, (_, lv) in prom.items() if lv} == console


async def test_check_flags_are_whole_queue_rules(dsn: str, conn: psycopg.Connection) -> None:
    """With flags, `check` judges just those (as before), named after their rules."""
    _incident(conn)
    proc = run_cli("check", "--max-dead", "2", "--max-ready", "100", dsn=dsn)
    assert proc.returncode == 1, proc.stdout
    assert proc.stdout.startswith("JOBTUI WARNING - 1 warning: dead letters 3 > 2 [dead_letters] |")
    assert "dead=3;2;4;0;" in proc.stdout


def _kind(**fields: object) -> KindFigures:
    return KindFigures(kind="k", **fields)  # type: ignore[arg-type]


def _snap(*kinds: KindFigures) -> Snapshot:
    return Snapshot(
        taken_at=datetime.now(UTC),
        totals=StateCounts(ready=sum(k.ready for k in kinds)),
        oldest_ready_age_s=None,
        done_per_min=0.0,
        failure_rate=0.0,
        kinds=list(kinds),
        history=[],
        workers=[],
        paused=frozenset(),
    )


@pytest.mark.parametrize(
    ("figures", "level", "text"),
    [
        (_kind(ready=50, drain_s=7200.0), Level.CRIT, "k: drain time 2h00m > 1h00m"),
        (_kind(ready=50, drain_s=2400.0), Level.WARN, "k: drain time 40m00s > 30m00s"),
        (_kind(ready=50, drain_s=600.0), Level.OK, "k: drain time 10m00s"),
        (_kind(ready=0), Level.OK, "k: drain time 0s"),
        (
            _kind(ready=50, not_draining=True),
            Level.CRIT,
            "k: not draining (arrivals keep up with completions)",
        ),
    ],
)
def test_drain_rule_on_the_estimate_fields(figures: KindFigures, level: Level, text: str) -> None:
    """KindFigures.drain_s / not_draining as metrics.snapshot will fill them."""
    rules = AlertRules(kind_defaults={"drain_time": Threshold(1800, 3600)})
    (verdict,) = alerts.assess(_snap(figures), rules)
    assert (verdict.rule, verdict.level, verdict.text) == ("drain_time", level, text)
    assert verdict.firing == (level > Level.OK)


def test_a_paused_kind_says_so_and_by_kind_groups_the_firings() -> None:
    snap = _snap(
        KindFigures(kind="a", ready=3, oldest_ready_age_s=4000.0, paused=True, handled=False),
        KindFigures(kind="b", ready=1, oldest_ready_age_s=10.0),
    )
    firings = alerts.evaluate(snap, AlertRules())
    assert [(f.rule, f.kind, f.level, f.text) for f in firings] == [
        ("oldest_ready", "a", Level.CRIT, "a: oldest ready job 1h06m > 30m00s (kind paused)"),
        ("no_worker", "a", Level.WARN, "a: no live worker handles it (3 ready) (kind paused)"),
    ]
    assert alerts.by_kind(firings) == {"a": {"oldest_ready": Level.CRIT, "no_worker": Level.WARN}}


def test_drain_fields_in_prometheus() -> None:
    snap = _snap(
        KindFigures(kind="a", ready=5, arrived_per_min=2.0, drain_s=90.0),
        KindFigures(kind="b", ready=5, arrived_per_min=9.0, not_draining=True),
    )
    samples = parse_prometheus(render([drain_section(snap), Section()], prometheus=True))
    assert samples[("jobtui_kind_drain_seconds", (("kind", "a"),))] == 90
    assert ("jobtui_kind_drain_seconds", (("kind", "b"),)) not in samples
    assert samples[("jobtui_kind_not_draining", (("kind", "b"),))] == 1
    assert samples[("jobtui_kind_not_draining", (("kind", "a"),))] == 0
    assert samples[("jobtui_kind_arrived_per_minute", (("kind", "b"),))] == 9


def test_overrides_globs_then_exact_names(tmp_path: Path) -> None:
    rules = load_console_config(
        _config(
            tmp_path,
            """
[alerts]
dead_letters = { warn = 10 }
[alerts.kinds.export_crm]
dead_letters = { crit = 1 }
[alerts.kinds."glob:export_*"]
dead_letters = { warn = 5, crit = 50 }
failure_rate = false
[alerts.queue]
ready = { warn = 1000 }
replica_lag = { warn = "30s", crit = "5m" }
""",
        )
    ).alerts
    assert rules.for_kind("export_crm")["dead_letters"] == Threshold(None, 1)
    assert rules.for_kind("export_pdf")["dead_letters"] == Threshold(5, 50)
    assert "failure_rate" not in rules.for_kind("export_pdf")
    assert rules.for_kind("mail")["dead_letters"] == Threshold(10, None)
    assert rules.for_kind("mail")["oldest_ready"] == Threshold(300, 1800)  # built-in default
    assert rules.queue == {"ready": Threshold(1000, None), "replica_lag": Threshold(30, 300)}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[alerts]\noldest_redy = { warn = '5m' }", "oldest_redy: unknown alert rule"),
        ("[alerts]\ndead_letters = { warn = -1 }", "dead_letters.warn: must not be negative"),
        ("[alerts]\ndead_letters = { warn = 'many' }", "expected a whole number"),
        ("[alerts]\ndead_letters = 5", "expected { warn = …, crit = … }"),
        ("[alerts]\noldest_ready = { warn = 'soon' }", "invalid duration"),
        ("[alerts]\nfailure_rate = { warn = 2 }", "at most 1"),
        ("[alerts]\nfailure_rate = { warn = nan }", "failure_rate.warn: expected a finite number"),
        ("[alerts]\noldest_ready = { warn = '99999999999999d' }", "oldest_ready.warn: invalid"),
        ("[alerts]\noldest_ready = { warn = '1h', crit = '5m' }", "crit must not be below warn"),
        ("[alerts]\noldest_ready = { warm = '1h' }", "unknown level(s) warm"),
        ("[alerts]\nreplica_lag = { warn = '1m' }", "put it under [alerts.queue]"),
        ("[alerts.queue]\nno_worker = { warn = 0 }", "judged per kind"),
        ("[alerts.mail]\nready = { warn = 1 }", 'go under [alerts.kinds."mail"]'),
        ("[alerts.kinds]\nmail = 3", '[alerts.kinds."mail"] must be a table'),
        ("alerts = 3", "[alerts] must be a table"),
        (
            "[console]\noldest_warn = '1m'\n[alerts]\noldest_ready = { warn = '2m' }",
            "keep one",
        ),
    ],
)
def test_bad_rules_are_one_line_errors_everywhere(
    tmp_path: Path, dsn: str, text: str, fragment: str
) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_console_config(path)
    message = str(info.value)
    assert fragment in message and "\n" not in message and str(path) in message, message
    check = run_cli("check", "--config", str(path), dsn=dsn)
    assert check.returncode == 3 and check.stdout == f"JOBTUI UNKNOWN - {message}\n", check
    assert "Traceback" not in check.stderr
    stats = run_cli("stats", "--config", str(path), dsn=dsn)
    assert stats.returncode == 1 and stats.stdout == "", stats
    assert stats.stderr.splitlines() == [f"jobtui: error: {message}"], stats.stderr


def test_console_oldest_levels_come_from_the_rule(tmp_path: Path) -> None:
    """The Overview's age colours (oldest_warn_s/crit_s) read the default oldest_ready rule,
    and `[console] oldest_warn` (the older spelling) sets that rule."""
    cfg = load_console_config(_config(tmp_path, "[alerts]\noldest_ready = { warn = '2m' }"))
    assert (cfg.oldest_warn_s, cfg.oldest_crit_s) == (120, math.inf)
    cfg = load_console_config(_config(tmp_path, "[console]\noldest_warn = '1m'\n"))
    assert cfg.alerts.for_kind("x")["oldest_ready"] == Threshold(60, 1800)
    assert (cfg.oldest_warn_s, cfg.oldest_crit_s) == (60, 1800)
    cfg = load_console_config(_config(tmp_path, "[alerts]\noldest_ready = false\n"))
    assert "oldest_ready" not in cfg.alerts.for_kind("x") and cfg.oldest_warn_s == math.inf


def _firing(rule: str, kind: str, level: Level, text: str) -> Verdict:
    return Verdict(rule, kind, level, 1.0, 0.0, text)


async def test_alarm_list_most_severe_first_and_inert() -> None:
    evil = "k\x1b[2Jboom"
    lines = await _alarm_lines(
        [
            _firing("dead_letters", "a", Level.WARN, "a: dead letters 3 > 0"),
            _firing("no_worker", evil, Level.CRIT, f"{evil}: no live worker handles it (1 ready)"),
        ]
    )
    assert lines == [
        "✗ CRIT k\\x1b[2Jboom: no live worker handles it (1 ready) [no_worker]",
        "! WARN a: dead letters 3 > 0 [dead_letters]",
    ], lines
    assert await _alarm_lines([]) == []


async def test_alarm_list_reads_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = AlarmApp()
    async with app.run_test(size=(80, 24)) as pilot:
        alarms = app.query_one(AlarmList)
        alarms.show(
            [
                _firing("dead_letters", "a", Level.WARN, "a: dead letters 3 > 0"),
                _firing("oldest_ready", "b", Level.CRIT, "b: oldest ready job 1h > 30m"),
            ]
        )
        await pilot.pause()
        assert app.no_color
        spans = {alarms.content.plain[s.start : s.end]: str(s.style) for s in alarms.content.spans}
        assert spans["✗ CRIT"] == "bold reverse" and spans["! WARN"] == "bold bold"
