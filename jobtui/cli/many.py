"""`jobtui stats` and `jobtui check` over several targets (`--target NAME`, `--all-targets`).

Every target is read at once, each on its own connection under its own connect and statement
timeout (`jobtui.targets.gather`): a target that is down, slow or locked gives its own error
entry and never delays or hides the others.

- `stats --json` nests per target: `{"targets": {"eu": {...the one-database keys...},
  "us": {"error": "...", "timed_out": false}}}`;
- `stats --prometheus` adds `target="eu"` to every series (each family's samples of all the
  targets together, as the format asks), plus `jobtui_target_up` (1 read, 0 not);
- `check` gives one verdict over every target: CRITICAL if any target has a critical problem,
  else UNKNOWN if any target could not be read, else WARNING, else OK; each problem line starts
  with its target's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobtui.cli import nagios
from jobtui.fleet import Outcome
from jobtui.inert import ascii_json, clean
from jobtui.inert import prometheus_label as _label
from jobtui.targets import describe


class Section(Protocol):
    """One part of `stats` output (`jobtui.cli.monitoring.Section`)."""

    @property
    def json(self) -> dict[str, Any]: ...

    @property
    def prometheus(self) -> list[str]: ...

    @property
    def text(self) -> str: ...


# The overall verdict's order: a critical problem anywhere outranks a target not read.
SEVERITY = (nagios.OK, nagios.WARNING, nagios.UNKNOWN, nagios.CRITICAL)


def render_stats(
    outcomes: Sequence[Outcome[Sequence[Section]]], *, prometheus: bool = False, json: bool = False
) -> str:
    """Every target's sections (or error) in one document."""
    if prometheus:
        return prometheus_text(outcomes)
    if json:
        nested: dict[str, object] = {}
        for o in outcomes:
            entry: dict[str, object] = describe(o.target)
            if o.value is None:
                entry.update(error=o.error, timed_out=o.timed_out)
            else:
                for s in o.value:
                    entry.update(s.json)
            nested[o.target.key] = entry
        return ascii_json({"targets": nested}, indent=2) + "\n"
    parts = []
    for o in outcomes:
        head = f"== {clean(o.target.title)}" + (" (danger)" if o.target.danger else "") + " =="
        if o.value is None:
            parts.append(f"{head}\nerror: {clean(o.error)}")
        else:
            parts.append(head + "\n" + "\n\n".join(s.text for s in o.value if s.text))
    return "\n\n".join(parts) + "\n"


def prometheus_text(outcomes: Sequence[Outcome[Sequence[Section]]]) -> str:
    """The targets' series, each with a `target` label, merged family by family."""
    up = [
        "# HELP jobtui_target_up 1 when the target's figures were read, 0 when it was down, "
        "slow or not migrated.",
        "# TYPE jobtui_target_up gauge",
        *(
            f'jobtui_target_up{{target="{_label(o.target.key)}"}} {0 if o.value is None else 1}.0'
            for o in outcomes
        ),
    ]
    families: dict[str, _Family] = {}
    for o in outcomes:
        current: _Family | None = None
        for line in (line for s in o.value or [] for line in s.prometheus):
            if line.startswith("# "):
                name = line.split(" ", 3)[2]
                current = families.setdefault(name, _Family())
                if line not in current.head:
                    current.head.append(line)
            elif line and current is not None:
                current.samples.append(with_target(line, o.target.key))
    lines = [*up]
    for f in families.values():
        lines += [*f.head, *f.samples]
    return "".join(line + "\n" for line in lines)


@dataclass
class _Family:
    head: list[str] = field(default_factory=list)  # HELP and TYPE, once
    samples: list[str] = field(default_factory=list)  # every target's


def with_target(sample: str, target: str) -> str:
    """`name{a="b"} 1` → `name{target="eu",a="b"} 1` (and `name 1` → `name{target="eu"} 1`)."""
    label = f'target="{_label(target)}"'
    brace, space = sample.find("{"), sample.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        inner = sample[brace + 1 :]
        return f"{sample[:brace]}{{{label}{'' if inner.startswith('}') else ','}{inner}"
    return f"{sample[:space]}{{{label}}}{sample[space:]}"


def _with_target(line: str, name: str) -> str:
    """`WARNING: mail: …` → `WARNING: eu: mail: …`; a line without a level (the `… and N more`
    of a target with more problems than fit) → `eu: … and N more`."""
    level, sep, rest = line.partition(": ")
    return f"{level}: {name}: {rest}" if sep else f"{name}: {line}"


def check_text(outcomes: Sequence[Outcome[nagios.Report]]) -> tuple[int, str]:
    """(exit code, plugin output) of one verdict over every target."""
    codes = [nagios.UNKNOWN if o.value is None else o.value.worst for o in outcomes]
    worst = max(codes, key=SEVERITY.index, default=nagios.OK)
    troubled = [(o, c) for o, c in zip(outcomes, codes, strict=True) if c != nagios.OK]
    troubled.sort(key=lambda oc: -SEVERITY.index(oc[1]))
    details: list[str] = []
    perf: list[str] = []
    for o in outcomes:
        name = nagios.text(o.target.key, 40)
        perf.append(f"{nagios.perf_label(name + '.up')}={0 if o.value is None else 1};;;0;")
        if o.value is None:
            continue
        perf += [
            f"{nagios.perf_label(name + '.' + p.split('=', 1)[0])}={p.split('=', 1)[1]}"
            for p in o.value.perf
        ]
    for o, _ in troubled:
        name = nagios.text(o.target.key, 40)
        if o.value is None:
            details.append(f"UNKNOWN: {name}: {nagios.text(o.error)}")
        else:
            details += [_with_target(line, name) for line in o.value.details]
    n = len(outcomes)
    if troubled:
        first = troubled[0][0]
        what = f"{nagios.text(first.target.key, 40)}: " + (
            nagios.text(first.error, nagios.FIRST_LINE_PROBLEM)
            if first.value is None
            else first.value.summary
        )
        summary = f"{len(troubled)} of {n} targets with problems; worst {what}"
    else:
        summary = f"{n} targets OK"
    shown = details[: nagios.MAX_DETAILS]
    if len(details) > nagios.MAX_DETAILS:
        shown.append(f"… and {len(details) - nagios.MAX_DETAILS} more (`jobtui stats` lists them)")
    first_line = f"JOBTUI {nagios.STATUS[worst]} - {summary} | {' '.join(perf)}"
    return worst, "\n".join([first_line, *shown])
