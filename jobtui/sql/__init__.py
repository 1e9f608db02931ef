"""Every SQL statement jobtui runs, loaded by name from the `.sql` files beside this module.

Each file holds statements under `-- name: NAME` headers. Table names are written as
`__schema__.table`; `queries(schema)` returns the statements with the validated, quoted schema
name substituted. Values are never formatted in: they always travel as parameters.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

SCHEMA_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_HEADER = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)
_STATEMENT = re.compile(r"__statement:([a-z0-9_]+)__")


class InvalidSchemaName(ValueError):
    """The schema name is not a plain identifier; it is refused rather than quoted blindly."""


def quote_schema(schema: str) -> str:
    """Return `schema` as a quoted identifier after checking it is a plain identifier."""
    if not SCHEMA_PATTERN.match(schema):
        raise InvalidSchemaName(
            f"invalid schema name {schema!r}: use letters, digits and underscores, starting "
            "with a letter or underscore, at most 63 characters"
        )
    return '"' + schema + '"'


def parse_named(text: str) -> dict[str, str]:
    """Split a `.sql` file into {name: statement} by its `-- name:` headers."""
    parts = _HEADER.split(text)
    named: dict[str, str] = {}
    for i in range(1, len(parts), 2):
        name, body = parts[i], parts[i + 1].strip()
        if name in named:
            raise ValueError(f"duplicate SQL name {name!r}")
        named[name] = body
    return named


# A `%` that is not a named placeholder (`%(name)s`) nor an escaped `%%`: fine in a statement
# run without parameters, but inside one run with them psycopg reads it as a placeholder.
_PLACEHOLDER = re.compile(r"%%|%\(\w+\)s")


def resolve_includes(sql: dict[str, str]) -> dict[str, str]:
    """Replace each `__statement:NAME__` with statement NAME's text, itself resolved.

    A statement that needs another's rows (the worker's queue sample needs the console's state
    counts) reads them from the one text instead of a copy of it. Checked when the statements
    are loaded, so a wrong name, a cycle or an included text that would break psycopg's
    placeholders fails there with the statement's name, not in a worker at run time.
    """
    done: dict[str, str] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> str:
        if name in done:
            return done[name]
        if name in chain:
            raise ValueError(f"SQL statement {name!r} includes itself: {' -> '.join(chain)}")

        def include(m: re.Match[str]) -> str:
            target = m.group(1)
            if target not in sql:
                raise ValueError(f"SQL statement {name!r} includes unknown statement {target!r}")
            text = resolve(target, (*chain, name))
            if "%" in _PLACEHOLDER.sub("", text):
                raise ValueError(
                    f"SQL statement {name!r} includes {target!r}, which has a bare '%':"
                    " write '%%' so it survives being run with parameters"
                )
            return text

        done[name] = _STATEMENT.sub(include, sql[name])
        return done[name]

    for name in sql:
        resolve(name, ())
    return done


@cache
def _raw() -> dict[str, str]:
    named: dict[str, str] = {}
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, body in parse_named(entry.read_text("utf-8")).items():
                if name in named:
                    raise ValueError(f"SQL name {name!r} defined twice")
                named[name] = body
    return named


class Queries:
    """The statements for one schema; attribute access by name (`q.claim`)."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        quoted = quote_schema(schema)
        self._sql = resolve_includes(
            {name: body.replace("__schema__", quoted) for name, body in _raw().items()}
        )

    def __getattr__(self, name: str) -> str:
        try:
            return self._sql[name]
        except KeyError:
            raise AttributeError(f"no SQL statement named {name!r}") from None

    def __getitem__(self, name: str) -> str:
        return self._sql[name]

    def names(self) -> list[str]:
        return sorted(self._sql)


@cache
def queries(schema: str = "public") -> Queries:
    """The statements for `schema`, cached per schema."""
    return Queries(schema)


@cache
def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel for `schema` (one per schema, at most 63 bytes)."""
    quote_schema(schema)
    return f"jobtui_{schema}"[:63]
