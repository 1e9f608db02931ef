"""The console's one write path: ask (naming the exact count), act through `jobtui.ops`, report.

`WriteController` takes the connection, the actor and the read-only flag. Each flow runs as a
worker: it counts what "matching now" would cover, shows a confirmation offering exactly the
selected rows or every row matching now, runs the one `ops` call, and reports the count the
database actually changed. Results and failures go back to the app as messages (`Done`,
`Failed`), handled in one place there; read-only mode refuses before asking.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from rich.text import Text
from textual.app import App
from textual.message import Message
from textual.notifications import SeverityLevel

from jobtui import browse, export, limits, ops
from jobtui.inert import clean, inert
from jobtui.models import DeadFilter
from jobtui.tui.actions import DELETE, RERUN, ActionSpec, describe_filter
from jobtui.tui.connection import Link, LinkDown
from jobtui.tui.host import WriteAsked
from jobtui.tui.screens.confirm import Choice, ConfirmScreen
from jobtui.tui.screens.export_prompt import ExportPathScreen
from jobtui.tui.screens.limits import LimitsScreen

# action: (verb, ops function, what the operator should know before confirming)
SCHEDULE_ACTIONS: dict[str, tuple[str, Callable[..., Awaitable[int]], str]] = {
    "pause": ("Pause", ops.pause_schedule, "no ticks are enqueued until it is resumed"),
    "resume": (
        "Resume",
        ops.resume_schedule,
        "ticks from now on are enqueued; ticks that fell while paused are not run",
    ),
    "run_now": (
        "Run now",
        ops.run_schedule_now,
        "enqueues one job of the schedule at once; its own ticks are unaffected",
    ),
}

FAILURES = (LinkDown, psycopg.Error, ValueError, OSError)


class WriteController:
    """Runs the confirmed write flows for one console app."""

    class Done(Message):
        """A flow ended: `text` is the notice; after a write, marks are cleared and the
        console refreshes (`wrote`), then `after` runs."""

        def __init__(
            self,
            text: str,
            *,
            severity: SeverityLevel = "information",
            timeout: float | None = None,
            wrote: bool = False,
            refresh: bool = False,
            after: Callable[[], Any] | None = None,
        ) -> None:
            super().__init__()
            self.text = text
            self.severity: SeverityLevel = severity
            self.timeout = timeout
            self.wrote = wrote
            self.refresh = refresh or wrote
            self.after = after

    class Failed(Message):
        """A flow failed: the database refused, was unreachable, or a file could not be written."""

        def __init__(self, error: BaseException) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self, app: App[Any], link: Link, actor: ops.Actor, read_only: Callable[[], bool]
    ) -> None:
        self.app = app
        self.link = link
        self.actor = actor
        self.read_only = read_only

    # --- what widgets ask for (through the app) ------------------------------------------

    def ask(self, request: WriteAsked) -> None:
        """Confirm and run `request.spec` on its ids or on every row matching its filter now."""
        spec = request.spec
        if spec is RERUN and len(request.ids) == 1:  # one job: the notice names the new job
            self._start(self._rerun(request.ids[0], request.after))
            return
        flow = self._ask(spec, request.ids, spec.scope(request.flt), request.group, request.after)
        self._start(flow)

    def toggle_pause(self, kind: str, paused: bool) -> None:
        """Pause `kind` (resume it when `paused`), after asking."""
        self._start(self._toggle_pause(kind, paused))

    def export(self, ids: list[int], flt: DeadFilter, group: str | None = None) -> None:
        self._start(self._export(ids, flt, group))

    def schedule(self, name: str, action: str) -> None:
        self._start(self._schedule(name, action))

    def kind_limits(self, kind: str) -> None:
        self._start(self._kind_limits(kind))

    # --- the flows -----------------------------------------------------------------------

    def _start(self, flow: Awaitable[None]) -> None:
        self.app.run_worker(self._reporting(flow), group="ask")

    async def _reporting(self, flow: Awaitable[None]) -> None:
        try:
            await flow
        except FAILURES as exc:
            self.app.post_message(self.Failed(exc))

    def _report(self, text: str, **options: Any) -> None:
        self.app.post_message(self.Done(text, **options))

    def _refused(self, what: str) -> bool:
        if self.read_only():
            self._report(f"Read-only: {what} is not allowed.", severity="warning")
            return True
        return False

    async def _ask(
        self,
        spec: ActionSpec,
        ids: list[int],
        flt: Any,
        group: str | None,
        after: Callable[[], Any] | None,
    ) -> None:
        if self._refused(spec.verb.lower()):
            return
        asked = list(ids)
        if ids and spec.key is not None:  # only rows the action can change are offered
            ids = await self.link.run(ops.applicable_ids, spec.key, ids)
        matching: int | None = None
        if flt is not None and spec.matching is not None and spec.count is not None:
            matching = await self.link.run(spec.count, flt)
        choices = _choices(spec, ids, matching, group)
        if not choices:
            self._report(_nothing(spec, asked), severity="warning")
            return
        body = _confirmation(spec, ids, flt, group, matching, len(asked) - len(ids))
        choice = await self.app.push_screen_wait(
            ConfirmScreen(_title(spec, ids, choices), body, choices, danger=spec.destructive)
        )
        if choice is None:
            return
        if choice == "ids":
            changed = await self.link.run(spec.by_ids, ids, actor=self.actor)
            wanted = len(ids)
        else:
            assert spec.matching is not None and spec.count is not None
            # The operator typed the count the dialog showed; rows may have arrived while they
            # typed. Acting on more than they confirmed is never right: ask again instead.
            now = await self.link.run(spec.count, flt)
            if now != matching:
                self._report(
                    f"Nothing was done: {now:,} rows match now, {matching or 0:,} when you "
                    "confirmed. Ask again to act on what matches now.",
                    severity="warning",
                    refresh=True,
                )
                return
            changed = await self.link.run(spec.matching, flt, actor=self.actor)
            wanted = matching or 0
        message = spec.outcome(changed)
        if changed < wanted:
            message += f" ({wanted - changed:,} of {wanted:,} had already changed or gone)"
        severity: SeverityLevel = "information" if changed else "warning"
        self._report(message + ".", severity=severity, wrote=True, after=after)

    async def _toggle_pause(self, kind: str, paused: bool) -> None:
        verb = "Resume" if paused else "Pause"
        if self._refused(f"{verb.lower()} a kind"):
            return
        note = (
            "workers claim its jobs again from now on"
            if paused
            else "workers stop claiming its jobs; jobs already running finish"
        )
        body = Text.assemble(
            (f"{verb} kind ", "bold"), inert(kind, style="bold"), "\n", (note + "; audited", "dim")
        )
        if not await self._confirmed(f"{verb} kind?", body, f"{verb} {clean(kind)}"):
            return
        fn = ops.resume_kind if paused else ops.pause_kind
        changed = await self.link.run(fn, kind, actor=self.actor)
        note = "" if changed else " (no change: it already was)"
        self._report(f"{verb}d kind {clean(kind)}{note}.", refresh=True)

    async def _rerun(self, job_id: int, after: Callable[[], Any] | None) -> None:
        if self._refused("run again"):
            return
        body = Text.assemble(
            (f"Run job #{job_id} again", "bold"),
            "\nas a new job: same kind, payload, priority, max attempts and unique key, due now,",
            "\nlinked to this one (which stays as it is); audited",
        )
        if not await self._confirmed(
            f"Run job #{job_id} again?", body, f"run #{job_id} again as a new job"
        ):
            return
        outcome = await self.link.run(ops.rerun_job, job_id, actor=self.actor)
        if outcome.new_id is None:
            holder = f"job #{outcome.held_by}" if outcome.held_by else "an unfinished job"
            self._report(
                f"Not run again: {holder} holds its unique key and is unfinished.",
                severity="warning",
                after=after,
            )
            return
        self._report(f"Job #{job_id} run again as job #{outcome.new_id}.", wrote=True, after=after)

    async def _confirmed(self, title: str, body: Text, label: str) -> bool:
        choice = await self.app.push_screen_wait(ConfirmScreen(title, body, [Choice("yes", label)]))
        return choice == "yes"

    async def _schedule(self, name: str, action: str) -> None:
        verb, fn, note = SCHEDULE_ACTIONS[action]
        if self._refused(f"{verb.lower()} a schedule"):
            return
        body = Text.assemble(
            (f"{verb} schedule ", "bold"), inert(name, style="bold"), "\n", (note, "dim")
        )
        if not await self._confirmed(f"{verb} schedule?", body, f"{verb} {clean(name)}"):
            return
        result = await self.link.run(fn, name, actor=self.actor)
        if action == "run_now":
            text = f"Schedule {clean(name)}: enqueued job #{result}."
        else:
            done = "Paused" if action == "pause" else "Resumed"
            note = "" if result else " (no change: it already was)"
            text = f"{done} schedule {clean(name)}{note}."
        self._report(text, refresh=True)

    async def _kind_limits(self, kind: str) -> None:
        if self._refused("setting limits"):
            return
        rows = await self.link.run(limits.list_kind_limits)
        current = next((r for r in rows if r.kind == kind), None)
        request = await self.app.push_screen_wait(LimitsScreen(kind, current))
        if request is None:
            return
        body = Text.assemble(
            ("Kind ", "bold"),
            inert(kind, style="bold"),
            ": ",
            request.describe(),
            ("\napplies from the next claim, across all workers; audited", "dim"),
        )
        if not await self._confirmed("Change limits?", body, "Apply"):
            return
        if request.clear:
            n = await self.link.run(ops.clear_kind_limits, kind, actor=self.actor)
            text = f"Kind {clean(kind)}: " + (
                "override cleared; declared limits apply." if n else "no override to clear."
            )
        else:
            n = await self.link.run(
                ops.set_kind_limits,
                kind,
                concurrency=request.concurrency,
                per_worker=request.per_worker,
                rate=request.rate,
                rate_period_s=request.period_s,
                actor=self.actor,
            )
            text = f"Kind {clean(kind)}: " + (
                f"{request.describe()}." if n else "already has these limits; nothing changed."
            )
        self._report(text, refresh=True)

    async def _export(self, ids: list[int], flt: DeadFilter, group: str | None) -> None:
        if self.app.is_web:  # `jobtui serve`: the file would be written on the server
            self._report(
                "Export writes a file on the server, so a browser session cannot; "
                "run `jobtui dead list --json` instead.",
                severity="warning",
            )
            return
        matching = await self.link.run(browse.count_dead, flt)
        choices = []
        if ids:
            choices += [
                Choice("ids:jsonl", f"{len(ids):,} selected → JSONL"),
                Choice("ids:csv", f"{len(ids):,} selected → CSV"),
            ]
        if matching and matching > len(ids):
            choices += [
                Choice("matching:jsonl", f"all {matching:,} matching → JSONL"),
                Choice("matching:csv", f"all {matching:,} matching → CSV"),
            ]
        if not choices:
            self._report("Nothing to export.")
            return
        body = Text.assemble(("Export dead letters", "bold"), " to a file; you choose where next")
        if matching:
            body.append("\nmatching now: ")
            body.append_text(inert(describe_filter(flt)))
        choice = await self.app.push_screen_wait(ConfirmScreen("Export?", body, choices))
        if choice is None:
            return
        scope, fmt = choice.split(":")
        n_rows = len(ids) if scope == "ids" else matching
        what = Text(f"{n_rows:,} dead letters as {fmt.upper()} to the file:")
        path = await self._export_path(what, export.default_export_path(fmt))
        if path is None:
            return
        selection: dict[str, Any] = {"ids": ids} if scope == "ids" else {"flt": flt}
        n = await self.link.run(
            export.export_dead, path.path, fmt=fmt, overwrite=path.overwrite, **selection
        )
        self._report(f"Exported {n:,} dead letters to {clean(str(path.path))}.", timeout=8)

    async def _export_path(self, what: Text, default: Path) -> _Target | None:
        """Ask where to write; an existing file is replaced only when the operator says so."""
        while True:
            path = await self.app.push_screen_wait(ExportPathScreen("Export to", what, default))
            if path is None:
                return None
            if not path.exists():
                return _Target(path, overwrite=False)
            body = Text.assemble(inert(str(path), style="bold"), " exists.")
            choices = [Choice("replace", "replace it"), Choice("other", "choose another name")]
            answer = await self.app.push_screen_wait(
                ConfirmScreen("File exists", body, choices, danger=True)
            )
            if answer == "replace":
                return _Target(path, overwrite=True)
            if answer is None:
                return None
            default = path


@dataclass(frozen=True)
class _Target:
    """Where an export goes, and whether the operator agreed to replace an existing file."""

    path: Path
    overwrite: bool


def _choices(
    spec: ActionSpec, ids: list[int], matching: int | None, group: str | None
) -> list[Choice]:
    """Exactly these rows, and every row matching now (typed: it is a bulk scope). A
    "matching" choice that covers no more rows than the named ones is not offered: a one-row
    dialog never shows the same choice twice."""
    out: list[Choice] = []
    if ids:
        these = f"{spec.noun} #{ids[0]}" if len(ids) == 1 else f"these {spec.nouns(len(ids))}"
        out.append(Choice("ids", f"{spec.verb.lower()} {these}"))
    if matching and matching > len(ids):
        scope = "in this group" if group else "matching the filter"
        label = f"{spec.verb.lower()} {matching:,} {scope}"
        out.append(Choice("matching", label, typed=str(matching)))
    return out


def _title(spec: ActionSpec, ids: list[int], choices: list[Choice]) -> str:
    if len(choices) == 1 and ids and len(ids) == 1 and choices[0].value == "ids":
        return f"{spec.verb} {spec.noun} #{ids[0]}?"
    return f"{spec.verb} {spec.noun}s?"


def _nothing(spec: ActionSpec, asked: list[int]) -> str:
    """Why no dialog opened: nothing the action could change."""
    if not asked:
        return f"Nothing to {spec.verb.lower()}."
    what = f"{spec.noun} #{asked[0]} is" if len(asked) == 1 else f"the {spec.nouns(len(asked))} are"
    return f"Nothing to {spec.verb.lower()}: {what} {spec.inapplicable}."


def _confirmation(
    spec: ActionSpec,
    ids: list[int],
    flt: Any,
    group: str | None,
    matching: int | None,
    left_alone: int,
) -> Text:
    """The confirmation's text: what is asked, exactly which rows, and what cannot be undone.

    The choices themselves are the buttons; the text says what each scope covers."""
    bulk = bool(matching and matching > len(ids))
    if group:
        what: list[str | Text | tuple[str, str]] = [("group ", "bold"), inert(group)]
    elif len(ids) == 1 and not bulk:
        what = [(f"{spec.noun} #{ids[0]}", "bold")]
    else:
        what = [(f"{spec.noun}s", "bold")]
    body = Text.assemble((f"{spec.verb} ", "bold"), *what)
    if spec.effect:
        body.append(f"\n{spec.effect}", style="dim")
    if len(ids) > 1:  # one id: its button names it
        shown = ", ".join(f"#{i}" for i in ids[:8]) + (" …" if len(ids) > 8 else "")
        body.append(f"\nselected: exactly {spec.nouns(len(ids))}: {shown}")
    if left_alone:
        body.append(f"\n{left_alone:,} more selected left alone: {spec.inapplicable}", style="dim")
    if bulk:
        body.append("\n")
        body.append("‼ ALL", style="bold reverse")
        body.append(f" {spec.nouns(matching or 0)} matching now: ")
        body.append_text(inert(describe_filter(flt)))
        body.append(
            "\n  you type the count to confirm; later arrivals are not included", style="dim"
        )
    if spec is DELETE:
        body.append("\n\nThis cannot be undone.", style="bold")
    return body
