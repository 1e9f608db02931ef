"""Issue 28: `stats` and `check` over several named targets, each on its own connection.

Three databases on the test server (the test's own, a second one reached by a role that may
only SELECT, a third whose jobs table is locked mid-test) and a target whose port is closed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from targets_support import closed_port_dsn, locked, read_only_role, write_config
from test_cli_monitoring import parse_prometheus
from test_cli_support import assert_one_error, run_cli

from jobtui.console_config import ConfigError, parse_console_config
from jobtui.targets import TargetError, select


def _dead(dsn: str, n: int, kind: str = "export_crm") -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                                         run_at, last_error, errors, reason)
               SELECT nextval('jobs_id_seq'), %s, %s, 3, 3, now(), now(), 'E: x', '[]', 'failed'
               FROM generate_series(1, %s)""",
            (kind, Jsonb({}), n),
        )


def _ready(dsn: str, n: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'mail', '{}' FROM generate_series(1, %s)",
            (n,),
        )


@pytest.fixture
def fleet(
    pg_server_dsn: str, dsn: str, second_dsn: str, tmp_path: Path
) -> Iterator[tuple[Path, str, str]]:
    """A config: eu (the test's database, danger), us (read-only role), gone (closed port)."""
    with read_only_role(pg_server_dsn, second_dsn) as (_role, ro_dsn):
        path = write_config(
            tmp_path / "config.toml",
            {
                "eu": {"dsn": dsn, "label": "EU prod", "danger": True, "colour": "magenta"},
                "us": {"dsn": ro_dsn, "timeout": "2s"},
                "gone": {"dsn": closed_port_dsn(), "timeout": "1s"},
            },
        )
        yield path, dsn, second_dsn


def test_config_declares_targets_and_refuses_bad_ones() -> None:
    cfg = parse_console_config(
        {"targets": {"eu": {"dsn": "postgresql://x@h/db", "danger": True, "schema": "q"}}}
    )
    assert cfg.targets["eu"].danger and cfg.targets["eu"].schema == "q"
    assert cfg.targets["eu"].title == "eu"
    for bad, needle in [
        ({"eu": {}}, "dsn must be"),
        ({"eu": {"dsn": "x", "danger": "yes"}}, "danger must be true or false"),
        ({"eu": {"dsn": "x", "colour": "not a colour!"}}, "colour must be"),
        ({"eu": {"dsn": "x", "colour": "blurple"}}, "colour must be"),
        ({"eu": {"dsn": "x", "schema": "a-b"}}, "schema must be"),
        ({"eu": {"dsn": "x", "password": "p"}}, "unknown key(s) password"),
        ({"e u": {"dsn": "x"}}, "a target name is"),
        # Two targets that look the same on screen: a confirmation could not tell them apart.
        ({"eu": {"dsn": "x", "label": "Prod"}, "us": {"dsn": "y", "label": "prod"}}, "its own"),
        ({"eu": {"dsn": "x"}, "us": {"dsn": "y", "label": "eu"}}, "shows as 'eu'"),
    ]:
        with pytest.raises(ConfigError, match="targets") as info:
            parse_console_config({"targets": bad})
        assert needle in str(info.value)
    declared = parse_console_config({"targets": {"eu": {"dsn": "a"}, "us": {"dsn": "b"}}}).targets
    assert [t.name for t in select(declared, ["us", "eu", "us"], False)] == ["us", "eu"]
    assert [t.name for t in select(declared, [], True)] == ["eu", "us"]
    assert select(declared, [], False) == []
    with pytest.raises(TargetError, match="unknown target 'asia'"):
        select(declared, ["asia"], False)
    with pytest.raises(TargetError, match="not both"):
        select(declared, ["eu"], False, dsn="postgresql://x")


def test_stats_json_nests_per_target_and_a_down_one_hides_nothing(
    fleet: tuple[Path, str, str],
) -> None:
    config, eu, us = fleet
    _ready(eu, 4)
    _dead(us, 2)
    proc = run_cli("stats", "--json", "--all-targets", "--config", str(config))
    assert proc.returncode == 1, proc.stderr  # one target could not be read
    (line,) = proc.stderr.splitlines()  # one line, naming the target that failed
    assert line.startswith("jobtui: error: target gone: could not connect")
    data = json.loads(proc.stdout)
    targets = data["targets"]
    assert list(targets) == ["eu", "us", "gone"]
    assert targets["eu"]["totals"]["ready"] == 4
    assert targets["eu"]["label"] == "EU prod" and targets["eu"]["danger"] is True
    assert targets["us"]["totals"]["dead"] == 2  # read by a role that may only SELECT
    assert "could not connect" in targets["gone"]["error"]
    assert "dsn" not in json.dumps(targets).lower()  # a DSN may hold a password


def test_stats_prometheus_labels_every_series_with_its_target(
    fleet: tuple[Path, str, str],
) -> None:
    config, eu, _us = fleet
    _ready(eu, 3)
    proc = run_cli(
        "stats", "--prometheus", "--target", "eu", "--target", "us", "--config", str(config)
    )
    assert proc.returncode == 0, proc.stderr
    samples = parse_prometheus(proc.stdout)  # valid: each family declared once, samples together
    assert all(dict(labels).get("target") in {"eu", "us"} for _, labels in samples)
    assert samples[("jobtui_jobs", (("target", "eu"), ("state", "ready")))] == 3
    assert samples[("jobtui_jobs", (("target", "us"), ("state", "ready")))] == 0
    assert samples[("jobtui_target_up", (("target", "eu"),))] == 1


def test_check_gives_one_verdict_naming_each_problems_target(
    fleet: tuple[Path, str, str],
) -> None:
    config, _eu, us = fleet
    _dead(us, 1)
    proc = run_cli("check", "--max-dead", "0", "--all-targets", "--config", str(config))
    assert proc.returncode == 2, proc.stdout  # a critical problem outranks a target not read
    first, *details = proc.stdout.splitlines()
    assert first.startswith("JOBTUI CRITICAL - 2 of 3 targets with problems; worst us:")
    assert "eu.up=1" in first and "gone.up=0" in first and "us.dead=1" in first
    assert details[0].startswith("CRITICAL: us: dead letters 1 > 0")
    assert details[1].startswith("UNKNOWN: gone: could not connect")
    healthy = run_cli("check", "--max-dead", "0", "--target", "eu", "--config", str(config))
    assert healthy.returncode == 0 and healthy.stdout.startswith("JOBTUI OK - 1 targets OK")
    down = run_cli(
        "check", "--max-dead", "5", "--target", "eu", "--target", "gone", "--config", str(config)
    )
    assert down.returncode == 3 and down.stdout.startswith("JOBTUI UNKNOWN - 1 of 2 targets")


def test_a_locked_target_times_out_on_its_own_without_delaying_the_others(
    dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    _ready(dsn, 2)
    config = write_config(
        tmp_path / "config.toml",
        {"eu": {"dsn": dsn}, "stuck": {"dsn": second_dsn, "timeout": "1s"}},
    )
    with locked(second_dsn):
        started = time.monotonic()
        proc = run_cli("stats", "--json", "--all-targets", "--config", str(config))
        took = time.monotonic() - started
    data = json.loads(proc.stdout)["targets"]
    assert proc.returncode == 1
    assert data["eu"]["totals"]["ready"] == 2
    assert data["stuck"]["timed_out"] is True or "timeout" in data["stuck"]["error"]
    assert took < 6  # its own 1 s timeout, not the default 5 s, nor one target after another


def test_target_selection_errors_are_one_line(fleet: tuple[Path, str, str]) -> None:
    config, eu, _us = fleet
    assert_one_error(
        run_cli("stats", "--target", "asia", "--config", str(config)),
        2,
        "unknown target 'asia' (known: eu, us, gone)",
    )
    assert_one_error(
        run_cli("stats", "--target", "eu", "--config", str(config), dsn=eu), 2, "not both"
    )
    env_cfg = {"JOBTUI_CONFIG": str(config)}
    from test_cli_support import clean_env

    assert_one_error(
        run_cli("jobs", "list", "--target", "eu", "--target", "us", env={**clean_env(), **env_cfg}),
        2,
        "acts on one database",
    )
    _ready(eu, 1)
    listed = run_cli("--target", "eu", "jobs", "list", env={**clean_env(), **env_cfg})
    assert listed.returncode == 0 and "mail" in listed.stdout
    check = run_cli("check", "--target", "asia", "--config", str(config))
    assert check.returncode == 3 and "unknown target 'asia'" in check.stdout


def test_console_over_targets_refuses_deep_links_and_needs_a_terminal(
    fleet: tuple[Path, str, str],
) -> None:
    config, _eu, _us = fleet
    assert_one_error(
        run_cli("console", "--config", str(config), "--all-targets", "--tab", "jobs"),
        2,
        "give one --target",
    )
    assert_one_error(
        run_cli("console", "--config", str(config), "--target", "eu", "--target", "us"),
        1,
        "needs a terminal",
    )
    assert_one_error(
        run_cli("console", "--config", str(config), "--target", "nope"), 2, "unknown target"
    )
    # Options given before `console` are kept (its own defaults once replaced --config).
    assert_one_error(
        run_cli("--config", str(config), "--all-targets", "console"), 1, "needs a terminal"
    )


def test_a_malformed_dsn_never_prints_its_password(dsn: str, tmp_path: Path) -> None:
    """libpq quotes a malformed URI whole in its error: the password must not follow it into
    `stats` (text, JSON, Prometheus, stderr) or `check`."""
    config = write_config(
        tmp_path / "config.toml",
        {
            "eu": {"dsn": dsn},
            "v6": {"dsn": "postgresql://ops:Sekr1tPw@[::1/app"},
            "kv": {"dsn": "host=127.0.0.1 password='Sekr1tKv dbname=app"},
        },
    )
    for args in (["stats"], ["stats", "--json"], ["stats", "--prometheus"], ["check"]):
        proc = run_cli(*args, "--all-targets", "--config", str(config))
        assert proc.returncode in (1, 3), proc.stderr
        assert "in URI" in proc.stdout + proc.stderr or args == ["stats", "--prometheus"]
        assert "Sekr1t" not in proc.stdout + proc.stderr, args


def test_check_with_a_target_of_more_problems_than_fit(dsn: str, tmp_path: Path) -> None:
    """More problem lines than a plugin's output holds in one target (101 kinds, no worker):
    its own `… and N more` line, named by target, not UNKNOWN from an IndexError."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k' || g, '{}' FROM generate_series(1, 101) g"
        )
    config = write_config(tmp_path / "config.toml", {"eu": {"dsn": dsn}})
    proc = run_cli("check", "--all-targets", "--config", str(config))
    assert proc.returncode == 1, proc.stdout
    first, *details = proc.stdout.splitlines()
    assert first.startswith("JOBTUI WARNING - 1 of 1 targets with problems; worst eu:")
    assert details[0].startswith("WARNING: eu: k")
    assert details[-1].startswith("… and "), details[-3:]  # the lines over the cap, counted
