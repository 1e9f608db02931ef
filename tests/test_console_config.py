"""Console config: defaults, the TOML file, and one-line errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobtui.alerts import DEFAULT_KIND_RULES, Threshold
from jobtui.console_config import (
    ConfigError,
    ConsoleConfig,
    default_config_path,
    load_console_config,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_when_the_default_file_is_absent(tmp_path: Path) -> None:
    cfg = load_console_config(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg == ConsoleConfig()
    assert (cfg.refresh_s, cfg.oldest_warn_s, cfg.oldest_crit_s, cfg.read_only) == (
        2.0,
        300.0,
        1800.0,
        False,
    )
    assert cfg.alerts.for_kind("any") == DEFAULT_KIND_RULES and cfg.alerts.queue == {}


def test_path_from_environment_and_xdg(tmp_path: Path) -> None:
    assert default_config_path({"JOBTUI_CONFIG": "/x/y.toml"}) == Path("/x/y.toml")
    assert default_config_path({"XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/jobtui/config.toml")


def test_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[console]
refresh = "5s"
oldest_warn = "1m"
oldest_crit = "10m"
read_only = true
page_size = 50

[keys]
requeue = "R"
"refresh.pause" = "z, ctrl+z"

[alerts]
dead_letters = { warn = 5, crit = 50 }
[alerts.kinds."export_*"]
dead_letters = false
""",
    )
    cfg = load_console_config(env={"JOBTUI_CONFIG": str(path)})
    assert cfg.refresh_s == 5 and cfg.oldest_warn_s == 60 and cfg.oldest_crit_s == 600
    assert cfg.read_only and cfg.page_size == 50
    assert cfg.keymap == {"requeue": "R", "refresh.pause": "z,ctrl+z"}
    assert cfg.alerts.for_kind("mail")["oldest_ready"] == Threshold(60, 600)  # [console] sets it
    assert cfg.alerts.for_kind("mail")["dead_letters"] == Threshold(5, 50)
    assert "dead_letters" not in cfg.alerts.for_kind("export_pdf")
    assert load_console_config(path, env={}) == cfg


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[console\nrefresh=1", "invalid TOML"),
        ('[console]\nrefresh = "soon"', "refresh"),
        ('[console]\noldest_warn = "30m"\noldest_crit = "5m"', "oldest_crit"),
        ('[console]\nrefersh = "2s"', "unknown setting"),
        ('[console]\nread_only = "yes"', "read_only"),
        ("[keys]\nrequeue = 5", "requeue"),
        ('[colours]\nx = "y"', "unknown table"),
        ("[console]\npage_size = 0", "page_size"),
        ("[alerts]\nno_such_rule = { warn = 1 }", "unknown alert rule"),
        ("[alerts]\nready = { crit = -3 }", "must not be negative"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_console_config(path)
    message = str(info.value)
    assert fragment in message and "\n" not in message and str(path) in message


def test_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_console_config(env={"JOBTUI_CONFIG": str(tmp_path / "missing.toml")})


@pytest.mark.parametrize("value", ['"10ms"', '"0.4s"', '"301s"', '"1h"', "0", '"abc"', "true"])
def test_refresh_out_of_range_or_not_a_duration_is_refused(tmp_path: Path, value: str) -> None:
    """The file's refresh was clamped without a word ("10ms" became 0.5 s) where `--refresh`
    refuses the same value: now refused, naming the file, the key and the range."""
    path = write(tmp_path, f"[console]\nrefresh = {value}")
    with pytest.raises(ConfigError) as info:
        load_console_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: [console] refresh: "), message
    assert "from 0.5s to 5m" in message and "\n" not in message


@pytest.mark.parametrize(("value", "seconds"), [('"0.5s"', 0.5), ('"5m"', 300.0), ("3", 3.0)])
def test_refresh_at_the_ends_of_its_range_is_taken(
    tmp_path: Path, value: str, seconds: float
) -> None:
    assert load_console_config(write(tmp_path, f"[console]\nrefresh = {value}")).refresh_s == (
        seconds
    )


def test_environment_name_and_danger_pattern(tmp_path: Path) -> None:
    cfg = load_console_config(
        write(tmp_path, '[console]\nenv = " prod-eu "\nenv_danger_pattern = "prod*,live*"\n')
    )
    assert (cfg.env, cfg.env_danger_pattern) == ("prod-eu", "prod*,live*")
    assert (ConsoleConfig().env, ConsoleConfig().env_danger_pattern) == (None, "prod*")
    for bad in ('env = ""', "env = 3", 'env_danger_pattern = "   "'):
        with pytest.raises(ConfigError, match="must be a non-empty string"):
            load_console_config(write(tmp_path, f"[console]\n{bad}\n"))
