"""The filter language of the `/` prompt: `state:ready,running kind:email some text`.

Jobs:          state:<s[,s]>  kind:<kind>  key:<unique key>  free text (an id, payload or error)
Dead letters:  kind:<kind>  key:<unique key>  error:<text>  sig:<signature>  free text
Values with spaces can be quoted: `error:"connection refused"`.
"""

from __future__ import annotations

import shlex

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


def parse_job_filter(text: str) -> JobFilter:
    fields, free = _split(_tokens(text), ("state", "states", "is", "kind", "key"))
    raw_states = fields.get("state") or fields.get("states") or fields.get("is") or ""
    states = tuple(s.strip().lower() for s in raw_states.split(",") if s.strip())
    unknown = [s for s in states if s not in JOB_STATES]
    if unknown:
        raise FilterError(f"unknown state {unknown[0]!r}: use one of {', '.join(JOB_STATES)}")
    return JobFilter(
        states=states, kind=fields.get("kind"), text=free, unique_key=fields.get("key")
    )


def parse_dead_filter(text: str) -> DeadFilter:
    fields, free = _split(_tokens(text), ("kind", "key", "error", "sig", "signature"))
    return DeadFilter(
        kind=fields.get("kind"),
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
