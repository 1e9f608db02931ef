"""The config file: the console's settings, its key map, and the alert rules every surface uses.

Read from one TOML file (`$JOBTUI_CONFIG`, else `~/.config/jobtui/config.toml`, or `--config`)
by one function that tests can point elsewhere. Kept free of textual so the CLI (`check`,
`stats`) can read the alert rules and validate the file without starting the UI.

    [console]
    refresh = "2s"
    read_only = false
    env = "prod"                   # a banner naming the environment (--env overrides)
    env_danger_pattern = "prod*"   # comma-separated globs: the banner is red when env matches

    [keys]
    requeue = "r,R"      # binding id = key[,key]

    [targets.eu]         # named databases (jobtui.targets): --target eu, --all-targets
    dsn = "postgresql://monitor@eu-db/app"
    danger = true

    [alerts]             # for every kind; see jobtui.alerts (rules not named keep defaults)
    oldest_ready = { warn = "5m", crit = "30m" }
    [alerts.kinds."export_*"]
    failure_rate = false

`[console] oldest_warn` / `oldest_crit` are the older spelling of `[alerts] oldest_ready`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jobtui.alerts import AlertRules, InvalidRule, Threshold, parse_rules
from jobtui.config import InvalidDuration, parse_duration
from jobtui.targets import Target, TargetError, parse_targets

MIN_REFRESH_S = 0.5
MAX_REFRESH_S = 300.0
_KEY = re.compile(r"^[A-Za-z0-9_+\-]+$")
_BINDING_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


class ConfigError(ValueError):
    """The console config file cannot be used; the message is one line naming file and field."""


@dataclass(frozen=True)
class ConsoleConfig:
    """Everything the console takes from config; defaults suit a first run."""

    refresh_s: float = 2.0
    oldest_warn_s: float = 300.0
    oldest_crit_s: float = 1800.0
    read_only: bool = False
    keymap: dict[str, str] = field(default_factory=dict)
    page_size: int = 100
    heartbeat_timeout_s: float = 30.0
    env: str | None = None
    env_danger_pattern: str = "prod*"
    # The alert rules (console alarm list, `check`, Prometheus). `oldest_warn_s`/`oldest_crit_s`
    # above are the default oldest_ready rule's levels, kept for the Overview's colours.
    alerts: AlertRules = field(default_factory=AlertRules)
    # Named databases (`[targets.NAME]`, see jobtui.targets), in file order.
    targets: dict[str, Target] = field(default_factory=dict)

    def with_(self, **changes: Any) -> ConsoleConfig:
        """A copy with some fields changed (e.g. the CLI's `--read-only`)."""
        return replace(self, **changes)


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$JOBTUI_CONFIG`, else `$XDG_CONFIG_HOME/jobtui/config.toml`, else `~/.config/...`."""
    env = os.environ if env is None else env
    explicit = env.get("JOBTUI_CONFIG")
    if explicit is not None and not explicit.strip():
        # `JOBTUI_CONFIG=${CFG}` of an unset variable: the default file (or none) is not the
        # file meant, and may lack its read_only = true or its targets.
        raise ConfigError("JOBTUI_CONFIG is set but empty: set it to a config file or unset it")
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "jobtui" / "config.toml"


def _seconds(where: str, value: object, within: tuple[float, float] | None = None) -> float:
    """A duration in seconds, more than zero, and within `within` when given: out of range is
    refused as `--refresh` refuses it (the file's refresh was clamped without a word: "10ms"
    became 0.5 s, "1h" 5 min)."""
    allowed = f" from {seconds_text(within[0])} to {seconds_text(within[1])}" if within else ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f'{where}: expected a duration{allowed} such as "2s" or "5m"')
    try:
        seconds = parse_duration(str(value)).total_seconds()
    except InvalidDuration as exc:
        raise ConfigError(f"{where}: {exc}{';' if within else ''}{allowed}") from None
    if within and not within[0] <= seconds <= within[1]:
        raise ConfigError(f"{where}: must be{allowed}, not {value!r}")
    if seconds <= 0:
        raise ConfigError(f"{where}: must be more than zero")
    return seconds


def seconds_text(seconds: float) -> str:
    """`seconds` as a duration the parser reads back: 0.5s, 5m (format_duration rounds 0.5 s
    to 0s); what `--refresh` and the config file's refresh say of their range."""
    return f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"


def _keys(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{where}: expected keys as a string, e.g. "r" or "r,ctrl+r"')
    keys = [k.strip() for k in value.split(",")]
    for key in keys:
        if not key or not (_KEY.match(key) or len(key) == 1):
            raise ConfigError(f"{where}: {key!r} is not a key name")
    return ",".join(keys)


def parse_console_config(data: Mapping[str, Any], where: str = "config") -> ConsoleConfig:
    """Build a ConsoleConfig from parsed TOML; unknown keys are errors so typos surface."""
    unknown = set(data) - {"console", "keys", "alerts", "targets"}
    if unknown:
        raise ConfigError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}")
    console = data.get("console", {})
    keys = data.get("keys", {})
    if not isinstance(console, Mapping) or not isinstance(keys, Mapping):
        raise ConfigError(f"{where}: [console] and [keys] must be tables")
    allowed = {
        "refresh",
        "oldest_warn",
        "oldest_crit",
        "read_only",
        "page_size",
        "env",
        "env_danger_pattern",
    }
    unknown = set(console) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) in [console]: {', '.join(sorted(unknown))}")
    cfg = ConsoleConfig()
    changes: dict[str, Any] = {}
    if "refresh" in console:
        changes["refresh_s"] = _seconds(
            f"{where}: [console] refresh", console["refresh"], (MIN_REFRESH_S, MAX_REFRESH_S)
        )
    if "oldest_warn" in console:
        changes["oldest_warn_s"] = _seconds(
            f"{where}: [console] oldest_warn", console["oldest_warn"]
        )
    if "oldest_crit" in console:
        changes["oldest_crit_s"] = _seconds(
            f"{where}: [console] oldest_crit", console["oldest_crit"]
        )
    if "read_only" in console:
        if not isinstance(console["read_only"], bool):
            raise ConfigError(f"{where}: [console] read_only must be true or false")
        changes["read_only"] = console["read_only"]
    if "page_size" in console:
        size = console["page_size"]
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 10000:
            raise ConfigError(f"{where}: [console] page_size must be an integer from 1 to 10000")
        changes["page_size"] = size
    for name in ("env", "env_danger_pattern"):
        if name in console:
            value = console[name]
            if not isinstance(value, str) or not value.strip() or len(value) > 64:
                raise ConfigError(
                    f"{where}: [console] {name} must be a non-empty string (at most 64 characters)"
                )
            changes[name] = value.strip()
    warn = changes.get("oldest_warn_s", cfg.oldest_warn_s)
    crit = changes.get("oldest_crit_s", cfg.oldest_crit_s)
    if crit < warn:
        raise ConfigError(f"{where}: [console] oldest_crit must not be below oldest_warn")
    changes.update(_alerts(where, data.get("alerts", {}), console, Threshold(warn, crit)))
    keymap: dict[str, str] = {}
    for binding_id, value in keys.items():
        if not _BINDING_ID.match(str(binding_id)):
            raise ConfigError(f"{where}: [keys] {binding_id!r} is not a binding id")
        keymap[str(binding_id)] = _keys(f"{where}: [keys] {binding_id}", value)
    changes["keymap"] = keymap
    try:
        changes["targets"] = parse_targets(data.get("targets", {}), where)
    except TargetError as exc:
        raise ConfigError(str(exc)) from None
    return replace(cfg, **changes)


def _alerts(
    where: str, table: object, console: Mapping[str, Any], oldest: Threshold
) -> dict[str, Any]:
    """The alert rules, and the Overview's oldest-ready levels taken from their default."""
    older = oldest if {"oldest_warn", "oldest_crit"} & set(console) else None
    try:
        rules = parse_rules(table, oldest_ready=older)
    except InvalidRule as exc:
        raise ConfigError(f"{where}: {exc}") from None
    default = rules.kind_defaults.get("oldest_ready", Threshold())
    warn = default.warn if default.warn is not None else default.crit
    return {
        "alerts": rules,
        "oldest_warn_s": float("inf") if warn is None else warn,
        "oldest_crit_s": float("inf") if default.crit is None else default.crit,
    }


def load_console_config(
    path: Path | None = None, env: Mapping[str, str] = os.environ
) -> ConsoleConfig:
    """Read the config file; a missing default file means defaults, a bad one a ConfigError.

    An explicit `path` or `$JOBTUI_CONFIG` that does not exist is an error (the operator
    named it); the default location may simply be absent.
    """
    target = path if path is not None else default_config_path(env)
    named = path is not None or bool(env.get("JOBTUI_CONFIG"))
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"{target}: config file not found") from None
        return ConsoleConfig()
    except OSError as exc:
        raise ConfigError(f"{target}: cannot read config file: {exc.strerror or exc}") from None
    import tomllib  # here: with no config file (the usual `stats` in a cron job) none is read

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{target}: config file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{target}: invalid TOML: {exc}") from None
    return parse_console_config(data, str(target))
