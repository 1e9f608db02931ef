"""The banners under the status line: environment, database unreachable, read-only / replica,
refresh paused — one line each, stacked, so none can hide another.

Each is shown only while it applies and redrawn only when its text changes. Colours come from
`app.tcss`; under NO_COLOR the text of every banner is in reverse video instead.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from jobtui.config import format_duration
from jobtui.inert import inert
from jobtui.models import ReplicaInfo
from jobtui.tui.texts import same

DEFAULT_DANGER_PATTERN = "prod*"
IDS = ("env-banner", "banner", "mode-banner", "paused-banner")


def env_is_dangerous(env: str, patterns: str) -> bool:
    """True when `env` matches one of the comma-separated glob `patterns` (any case)."""
    name = env.lower()
    return any(
        fnmatch.fnmatchcase(name, p.strip().lower()) for p in patterns.split(",") if p.strip()
    )


def lag_text(replica: ReplicaInfo) -> str:
    """`lag 1.2s` (or why it is unknown) for the replica badge."""
    if replica.lag_s is None:
        return "lag unknown (nothing replayed yet)"
    if replica.lag_s < 60:
        return f"lag {replica.lag_s:.1f}s"
    return f"lag {format_duration(replica.lag_s)}"


class Banners(Vertical):
    """`#env-banner`, `#banner` (database unreachable), `#mode-banner`, `#paused-banner`."""

    def compose(self) -> ComposeResult:
        for banner_id in IDS:
            yield Static(id=banner_id)

    def on_mount(self) -> None:
        for banner_id in IDS:
            self.query_one(f"#{banner_id}").display = False

    def _set(self, banner_id: str, text: Text | None) -> Static:
        banner = self.query_one(f"#{banner_id}", Static)
        banner.display = text is not None
        if text is not None and not same(banner.content, text):
            banner.update(text)
        return banner

    def show_env(self, env: str | None, danger: bool) -> None:
        """The environment's name; red (class `-danger`) when it matched the danger pattern."""
        text = None
        if env is not None:
            mark = "⚠ " if danger else ""
            text = Text.assemble((f"{mark}ENVIRONMENT ", "bold"), inert(env.upper(), style="bold"))
        self._set("env-banner", text).set_class(danger, "-danger")

    def show_down(self, error: str | None, retry_in: float, data_age_s: float | None) -> None:
        """While the database is unreachable: why, when the next try is, how old the data is
        (an age, not a wall-clock time: this machine's clock may differ from the server's)."""
        if error is None:
            self._set("banner", None)
            return
        since = (
            "no data yet"
            if data_age_s is None
            else f"data shown is from {format_duration(data_age_s)} ago"
        )
        self._set(
            "banner",
            Text.assemble(
                ("⚠ DATABASE UNREACHABLE ", "bold"),
                inert(error),
                f" — retrying in {retry_in:.0f}s; {since}",
            ),
        )

    def show_mode(self, replica: ReplicaInfo | None, read_only_why: str | None) -> None:
        """REPLICA with its lag, and READ-ONLY with the reason (None: not read-only)."""
        parts: list[Any] = []
        if replica is not None:
            parts += [("REPLICA ", "bold"), lag_text(replica), " · "]
        if read_only_why is not None:
            parts += [
                ("READ-ONLY: ", "bold"),
                inert(read_only_why),
                ("; write actions hidden", "dim"),
            ]
        self._set("mode-banner", Text.assemble(*parts) if parts else None)

    def show_paused(self, paused: bool) -> None:
        text = Text("⏸ LIVE REFRESH PAUSED — press p to resume", style="bold")
        self._set("paused-banner", text if paused else None)
