"""The one escaper for untrusted text (`jobtui.inert`), and each place that prints through it:
the console's Rich texts, the CLI's tables and details, Prometheus labels and exports.

Hostile text end to end (stored by a handler, shown by CLI and console) is in test_hostile.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from rich.text import Text

from jobtui import export
from jobtui.cli import output
from jobtui.inert import ascii_json, clean, inert, payload_json, payload_preview, prometheus_label
from jobtui.models import DeadFilter, KindFigures, Snapshot, StateCounts

HOSTILE = "a\x1b]52;c;x\x07b \x9b31m \u202e [bold]x[/bold]"


def test_control_characters_become_visible() -> None:
    assert clean("a\x1b]52;c;x\x07b") == "a\\x1b]52;c;x\\x07b"
    assert clean("\x9b31m\u202e") == "\\x9b31m\\u202e"
    assert clean("line1\nline2\tx") == "line1\\nline2\\tx"
    assert clean("line1\nline2\tx", multiline=True) == "line1\nline2\tx"


def test_inert_text_is_never_markup() -> None:
    text = inert("[bold]x[/bold] \x1b[31m")
    assert isinstance(text, Text)
    assert text.plain == "[bold]x[/bold] \\x1b[31m"
    assert not text.spans


def test_payloads_are_escaped() -> None:
    payload = {"s": "\x1b]52;\x9b [b]"}
    assert "\x1b" not in payload_json(payload) and "\x9b" not in payload_json(payload)
    assert "\\u001b]52;" in payload_json(payload) and "\\x9b" in payload_json(payload)
    preview = payload_preview({"k": "v" * 500}, width=40)
    assert len(preview) == 40 and preview.endswith("…")


def test_the_cli_table_shows_control_characters_as_escapes() -> None:
    text = output.table(("KIND", "ERROR"), [("k", HOSTILE)])
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text and "\x07" not in text
    assert clean(HOSTILE) in text


def test_prometheus_labels_are_escaped_then_quoted() -> None:
    assert prometheus_label('x"\\\x1b') == 'x\\"\\\\\\\\x1b'
    snap = Snapshot(
        taken_at=datetime.now(UTC),
        totals=StateCounts(),
        oldest_ready_age_s=None,
        done_per_min=0.0,
        failure_rate=0.0,
        kinds=[KindFigures(kind=HOSTILE)],
        workers=[],
        history=[],
        paused=frozenset(),
    )
    text = output.prometheus_text(snap)
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text


def test_ascii_json_is_lossless_and_inert() -> None:
    value = {"s": HOSTILE, "n": [1, "\u202e"]}
    text = ascii_json(value)
    assert all(32 <= ord(c) < 127 for c in text)
    assert json.loads(text) == value


async def test_an_export_to_jsonl_carries_hostile_text_escaped_and_intact(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, tmp_path: Path
) -> None:
    conn.execute(
        "INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,"
        " last_error, errors, reason) VALUES (1, 'hostile', %s, 1, 1, now(), now(), %s, '[]',"
        " 'failed')",
        (json.dumps({"s": HOSTILE}), HOSTILE),
    )
    out = tmp_path / "dead.jsonl"
    assert await export.export_dead(aconn, "public", out, flt=DeadFilter(kind="hostile")) == 1
    raw = out.read_text("utf-8")
    assert "\x1b" not in raw and "\x9b" not in raw and "\u202e" not in raw
    rec = json.loads(raw)
    assert rec["payload"] == {"s": HOSTILE} and rec["last_error"] == HOSTILE
