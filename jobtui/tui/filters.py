"""The filter language of the `/` prompt: `state:ready,running kind:email some text`.

Jobs:          state:<s[,s]>  kind:<kind>  key:<unique key>  free text (an id, payload or error)
Dead letters:  kind:<kind>  key:<unique key>  error:<text>  sig:<signature>  free text
Values with spaces can be quoted: `error:"connection refused"`. Given the known kinds, `kind:`
may be the start of one (`kind:email` is `email.send`); when it starts several, the filter is
refused with their names.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from jobtui.models import JOB_STATES, DeadFilter, JobFilter


class FilterError(ValueError):
    """The filter text cannot be understood; the message says which part."""


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _split(tokens: list[str], allowed: tuple[str, ...]) -> tuple[dict[str, str], str | None]:
    fields: dict[str, str] = {}
    free: list[str] = []
    for token in tokens:
        name, sep, value = token.partition(":")
        if sep and name.lower() in allowed and value:
            fields[name.lower()] = value
        elif sep and name.lower() in allowed:
            raise FilterError(f"{name}: needs a value, e.g. {name}:something")
        else:
            free.append(token)
    return fields, (" ".join(free) or None)


def kinds_matching(typed: str, known: Sequence[str]) -> list[str]:
    """Known kinds `typed` names: itself, else those it begins (`email` → `email.send`), else
    those it is part of; any case."""
    if typed in known:
        return [typed]
    low = typed.lower()
    for test in (str.startswith, str.__contains__):
        found = [k for k in known if test(k.lower(), low)]
        if found:
            return found
    return []


def resolve_kind(typed: str | None, known: Sequence[str]) -> str | None:
    """The kind `kind:TYPED` means. One match: that kind. Several: an error naming them, so
    the filter never shows an unexplained 0 rows. None (or no list of kinds): as typed (a
    kind whose jobs all finished is not in the list and can still be looked at)."""
    if typed is None or not known:
        return typed
    found = kinds_matching(typed, known)
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise FilterError(f"kind:{typed} matches {len(found)} kinds ({shown}): type more")
    return found[0] if found else typed


def complete_kind(value: str, known: Sequence[str]) -> str | None:
    """`value` with its last word, a `kind:` prefix, completed to the first known kind."""
    head, _, last = value.rpartition(" ")
    name, sep, typed = last.partition(":")
    if not sep or name.lower() != "kind" or not typed:
        return None
    found = [k for k in known if k.lower().startswith(typed.lower()) and k != typed]
    if not found:
        return None
    done = f"{name}:{_quote(found[0])}"
    return f"{head} {done}" if head else done


def parse_job_filter(text: str, kinds: Sequence[str] = ()) -> JobFilter:
    """The Jobs filter; `kinds` (the known kinds) lets `kind:` be a prefix of one."""
    fields, free = _split(_tokens(text), ("state", "states", "is", "kind", "key"))
    raw_states = fields.get("state") or fields.get("states") or fields.get("is") or ""
    states = tuple(s.strip().lower() for s in raw_states.split(",") if s.strip())
    unknown = [s for s in states if s not in JOB_STATES]
    if unknown:
        raise FilterError(f"unknown state {unknown[0]!r}: use one of {', '.join(JOB_STATES)}")
    return JobFilter(
        states=states,
        kind=resolve_kind(fields.get("kind"), kinds),
        text=free,
        unique_key=fields.get("key"),
    )


def parse_dead_filter(text: str, kinds: Sequence[str] = ()) -> DeadFilter:
    """The Dead letters filter; `kinds` as for `parse_job_filter`."""
    fields, free = _split(_tokens(text), ("kind", "key", "error", "sig", "signature"))
    return DeadFilter(
        kind=resolve_kind(fields.get("kind"), kinds),
        unique_key=fields.get("key"),
        error=fields.get("error"),
        signature=fields.get("sig") or fields.get("signature"),
        text=free,
    )


def _quote(value: str) -> str:
    return shlex.quote(value) if any(c.isspace() or c in "'\"" for c in value) else value


def format_job_filter(flt: JobFilter) -> str:
    parts = []
    if flt.states:
        parts.append("state:" + ",".join(flt.states))
    if flt.kind:
        parts.append("kind:" + _quote(flt.kind))
    if flt.unique_key:
        parts.append("key:" + _quote(flt.unique_key))
    if flt.text:
        parts.append(flt.text)
    return " ".join(parts)


def format_dead_filter(flt: DeadFilter) -> str:
    parts = []
    if flt.kind:
        parts.append("kind:" + _quote(flt.kind))
    if flt.unique_key:
        parts.append("key:" + _quote(flt.unique_key))
    if flt.signature:
        parts.append("sig:" + _quote(flt.signature))
    if flt.error:
        parts.append("error:" + _quote(flt.error))
    if flt.text:
        parts.append(flt.text)
    return " ".join(parts)
