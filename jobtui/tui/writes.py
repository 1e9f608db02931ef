"""Write flows of the console: ask (naming the exact count), then act through `jobtui.ops`.

Each flow is an async worker: it counts what "matching now" would cover, shows a confirmation
offering exactly the selected rows or every row matching now, runs the one `ops` call, and
reports the count the database actually changed. Read-only mode refuses before asking.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from rich.text import Text
from textual import work
from textual.app import App

from jobtui import browse, ops
from jobtui.db import describe_error
from jobtui.models import DeadFilter, JobFilter
from jobtui.tui.actions import (
    CANCEL,
    DELETE,
    REQUEUE,
    RUN_NOW,
    ActionSpec,
    cancellable,
    describe_filter,
)
from jobtui.tui.connection import Link, LinkDown
from jobtui.inert import clean, inert
from jobtui.tui.screens.confirm import Choice, ConfirmScreen
from jobtui.tui.widgets.keyed_table import KeyedTable


class WriteFlows(App[int]):
    """Mixed into the console app, which provides the connection and the hooks below."""

    link: Link
    actor: ops.Actor

    @property
    def read_only(self) -> bool:
        raise NotImplementedError

    def refresh_now(self) -> None:
        raise NotImplementedError

    def _set_down(self, message: str) -> None:
        raise NotImplementedError

    def _go_read_only(self, why: str) -> None:
        raise NotImplementedError

    def ask_requeue(
        self,
        ids: list[int],
        flt: DeadFilter | None,
        *,
        group: str | None = None,
        after: Callable[[], Any] | None = None,
    ) -> None:
        self._ask(REQUEUE, ids, flt, group, after)

    def ask_delete(
        self,
        ids: list[int],
        flt: DeadFilter | None,
        *,
        group: str | None = None,
        after: Callable[[], Any] | None = None,
    ) -> None:
        self._ask(DELETE, ids, flt, group, after)

    def ask_cancel_jobs(
        self, ids: list[int], flt: JobFilter | None, *, after: Callable[[], Any] | None = None
    ) -> None:
        narrowed = cancellable(flt) if flt is not None else None
        self._ask(CANCEL, ids, narrowed, None, after)

    def ask_run_now(
        self, ids: list[int], flt: JobFilter | None, *, after: Callable[[], Any] | None = None
    ) -> None:
        self._ask(RUN_NOW, ids, None, None, after)

    def _refuse_read_only(self, what: str) -> bool:
        if self.read_only:
            self.notify(f"Read-only: {what} is not allowed.", severity="warning", markup=False)
            return True
        return False

    def _action_error(self, exc: BaseException) -> None:
        message = exc.message if isinstance(exc, LinkDown) else describe_error(exc)
        if isinstance(exc, LinkDown):
            self._set_down(exc.message)
        if isinstance(exc, pgerrors.InsufficientPrivilege):
            self._go_read_only("the database refused a write (insufficient privilege)")
        self.notify(clean(message), severity="error", markup=False, timeout=8)

    @work(group="ask")
    async def _ask(
        self,
        spec: ActionSpec,
        ids: list[int],
        flt: Any,
        group: str | None,
        after: Callable[[], Any] | None,
    ) -> None:
        if self._refuse_read_only(spec.verb.lower()):
            return
        matching: int | None = None
        try:
            if flt is not None and spec.matching is not None and spec.count is not None:
                matching = await self.link.run(spec.count, flt)
        except (LinkDown, psycopg.Error, ValueError) as exc:
            self._action_error(exc)
            return
        choices: list[Choice] = []
        if ids:
            these = (
                f"this {spec.noun} #{ids[0]}" if len(ids) == 1 else f"these {spec.nouns(len(ids))}"
            )
            choices.append(Choice("ids", these))
        if matching:
            scope = "in this group" if group else "matching the filter"
            choices.append(Choice("matching", f"all {spec.nouns(matching)} {scope} now"))
        if not choices:
            self.notify(f"Nothing to {spec.verb.lower()}.", markup=False)
            return
        if len(ids) == 1 and flt is None and not spec.destructive:
            choice: str | None = "ids"
        else:
            body = Text.assemble(
                (f"{spec.verb} ", "bold"),
                *(
                    [("group ", "bold"), inert(group), "\n"]
                    if group
                    else [(f"{spec.noun}s", "bold"), "\n"]
                ),
            )
            if ids:
                shown = ", ".join(f"#{i}" for i in ids[:8]) + (" …" if len(ids) > 8 else "")
                body.append(f"\n1 · exactly {spec.nouns(len(ids))}: {shown}")
            if matching:
                n = len(choices)
                body.append(f"\n{n} · every {spec.noun} matching now ({matching:,}): ")
                body.append_text(inert(describe_filter(flt)))
                body.append(
                    "\n    rows that arrive after you confirm are not included", style="dim"
                )
            if spec.destructive:
                body.append("\n\nThis cannot be undone." if spec is DELETE else "", style="bold")
            choice = await self.push_screen_wait(
                ConfirmScreen(f"{spec.verb}?", body, choices, danger=spec.destructive)
            )
        if choice is None:
            return
        try:
            if choice == "ids":
                changed = await self.link.run(spec.by_ids, ids, actor=self.actor)
                asked = len(ids)
            else:
                assert spec.matching is not None
                changed = await self.link.run(spec.matching, flt, actor=self.actor)
                asked = matching or 0
        except (LinkDown, psycopg.Error, ValueError) as exc:
            self._action_error(exc)
            return
        message = spec.outcome(changed)
        if changed < asked:
            message += f" ({asked - changed:,} of {asked:,} had already changed or gone)"
        self.notify(message + ".", markup=False, severity="information" if changed else "warning")
        self._after_write(after)

    def _after_write(self, after: Callable[[], Any] | None) -> None:
        for table in self.query(KeyedTable):
            table.clear_marks()
        if after is not None:
            after()
        self.refresh_now()

    def toggle_pause(self, kind: str, paused: bool) -> None:
        self._toggle_pause(kind, paused)

    @work(group="ask")
    async def _toggle_pause(self, kind: str, paused: bool) -> None:
        if self._refuse_read_only("pausing a kind"):
            return
        fn = ops.resume_kind if paused else ops.pause_kind
        try:
            changed = await self.link.run(fn, kind, actor=self.actor)
        except (LinkDown, psycopg.Error, ValueError) as exc:
            self._action_error(exc)
            return
        verb = "Resumed" if paused else "Paused"
        note = "" if changed else " (no change: it already was)"
        self.notify(f"{verb} kind {clean(kind)}{note}.", markup=False)
        self.refresh_now()

    def ask_export(self, ids: list[int], flt: DeadFilter, *, group: str | None = None) -> None:
        self._export(ids, flt, group)

    @work(group="ask")
    async def _export(self, ids: list[int], flt: DeadFilter, group: str | None) -> None:
        from jobtui import export

        try:
            matching = await self.link.run(browse.count_dead, flt)
        except (LinkDown, psycopg.Error, ValueError) as exc:
            self._action_error(exc)
            return
        choices = []
        if ids:
            choices += [
                Choice("ids:jsonl", f"{len(ids):,} selected → JSONL"),
                Choice("ids:csv", f"{len(ids):,} selected → CSV"),
            ]
        if matching:
            choices += [
                Choice("matching:jsonl", f"all {matching:,} matching → JSONL"),
                Choice("matching:csv", f"all {matching:,} matching → CSV"),
            ]
        if not choices:
            self.notify("Nothing to export.", markup=False)
            return
        body = Text.assemble(
            ("Export dead letters", "bold"), " to a file in ", inert(str(Path.cwd()))
        )
        if matching:
            body.append("\nmatching now: ")
            body.append_text(inert(describe_filter(flt)))
        choice = await self.push_screen_wait(ConfirmScreen("Export?", body, choices))
        if choice is None:
            return
        scope, fmt = choice.split(":")
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        path = Path.cwd() / f"jobtui-dead-{stamp}.{fmt}"
        try:
            if scope == "ids":
                n = await self.link.run(export.export_dead, path, ids=ids, fmt=fmt)
            else:
                n = await self.link.run(export.export_dead, path, flt=flt, fmt=fmt)
        except (LinkDown, psycopg.Error, ValueError, OSError) as exc:
            self._action_error(exc)
            return
        self.notify(f"Exported {n:,} dead letters to {clean(str(path))}.", markup=False, timeout=8)
