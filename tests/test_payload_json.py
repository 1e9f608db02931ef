"""The payload encoder reuses one C encoder (jobtui.jobspec._encode): it must write exactly what
`json.dumps(..., ensure_ascii=False, allow_nan=False)` writes, refuse the same payloads with the
same words, keep no state from one call (or thread) to the next, and reach the database intact.
"""

from __future__ import annotations

import enum
import json
import threading
from collections import OrderedDict
from decimal import Decimal

import psycopg
import pytest

from jobtui import InvalidJob, enqueue_many
from jobtui.jobspec import _C_ENCODER, _ENCODER, payload_json


def dumps(payload: object) -> str:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


class Colour(enum.IntEnum):
    RED = 1


class Tagged(str):
    pass


SAME_AS_JSON = [
    {},
    [],
    None,
    True,
    0,
    -(2**70),
    1.5,
    1e300,
    -0.0,
    "plain",
    "é€ 😀 \u2028",
    'quote " backslash \\ tab \t newline \n',
    {"a": {"b": [1, {"c": None}]}},
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
    (1, 2, 3),
    OrderedDict([("z", 1), ("a", 2)]),
    {"colour": Colour.RED},
    {"tag": Tagged("x")},
    [[[[[]]]]],
]


def test_the_c_encoder_is_used_here() -> None:
    """CPython has the accelerator; without it the tests below would only test the fallback."""
    assert _C_ENCODER is not None


@pytest.mark.parametrize("payload", SAME_AS_JSON, ids=repr)
def test_it_writes_what_json_dumps_writes(payload: object) -> None:
    assert payload_json(payload) == dumps(payload)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"x": object()}, "not JSON-serialisable: Object of type object"),
        ({"x": Decimal("1.5")}, "not JSON-serialisable: Object of type Decimal"),
        ({"x": float("nan")}, "not JSON-serialisable: Out of range float"),
        ({"x": float("inf")}, "not JSON-serialisable: Out of range float"),
        ({("a", "b"): 1}, "not JSON-serialisable: keys must be"),
        ({"x": "a\x00b"}, "NUL"),
        ({"x": "\ud800"}, "lone surrogate"),
    ],
)
def test_it_refuses_what_jsonb_cannot_store(payload: object, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        payload_json(payload)


def test_a_cycle_is_named_as_a_cycle() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(InvalidJob, match="Circular reference"):
        payload_json(looped)


def test_deep_nesting_is_refused_in_plain_words() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidJob, match="nested too deeply"):
        payload_json(deep)


def test_a_refused_payload_leaves_nothing_behind_for_the_next() -> None:
    """A failure half-way through a container must not poison later calls (no shared markers)."""
    shared = {"n": 1}
    with pytest.raises(InvalidJob):
        payload_json([shared, {"bad": object()}])
    assert payload_json([shared, shared]) == '[{"n": 1}, {"n": 1}]'
    with pytest.raises(InvalidJob):
        payload_json({"inner": shared, "bad": float("nan")})
    assert payload_json({"again": shared}) == '{"again": {"n": 1}}'


def test_threads_encoding_the_same_object_at_once_agree() -> None:
    """One encoder shared by threads: the same payload object in flight twice is no cycle."""
    payload = {"rows": [{"i": i, "s": "x" * 50} for i in range(2_000)]}
    expected = dumps(payload)
    results: list[str] = []
    errors: list[BaseException] = []

    def encode_many() -> None:
        try:
            for _ in range(50):
                results.append(payload_json(payload))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=encode_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 200 and set(results) == {expected}


def test_the_fallback_alone_writes_the_same() -> None:
    for payload in SAME_AS_JSON:
        assert _ENCODER.encode(payload) == payload_json(payload)


def test_payloads_reach_the_database_intact(conn: psycopg.Connection) -> None:
    payloads = [
        {"text": "é€ 😀 \u2028", "n": -(2**62), "f": 1.5, "nested": [[{}], None, True]},
        ['quote " backslash \\ tab \t newline \n'],
        "just a string",
        {"1": "int key"},
    ]
    enqueue_many(conn, [{"kind": "k", "payload": p} for p in payloads])
    got = [r[0] for r in conn.execute("SELECT payload FROM jobs ORDER BY id").fetchall()]
    assert got == payloads
