"""The handler registry: declaring handlers, back-off arithmetic, loading an app by name."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest

from jobtui.registry import Registry, RegistryImportError, load_registry


def test_handlers_register_by_kind_and_know_whether_they_are_async() -> None:
    reg = Registry()

    @reg.handler("a", max_attempts=3, timeout=2.5)
    async def a(payload: Any) -> None:
        return None

    @reg.handler("p")
    def p(payload: Any) -> None:
        return None

    class Callable:
        async def __call__(self, payload: Any) -> None:
            return None

    async def two(payload: Any, extra: int) -> None:
        return None

    reg.handler("obj")(Callable())
    reg.handler("partial")(functools.partial(two, extra=1))
    assert reg.kinds() == ["a", "obj", "p", "partial"]
    spec = reg.get("a")
    assert spec is not None and spec.fn is a and spec.is_async
    assert (spec.max_attempts, spec.timeout) == (3, 2.5)
    assert reg.get("p") is not None and not reg.get("p").is_async  # type: ignore[union-attr]
    assert reg.get("obj").is_async and reg.get("partial").is_async  # type: ignore[union-attr]
    assert reg.get("missing") is None


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("", {}, "non-empty"),
        ("k", {"max_attempts": 0}, "max_attempts"),
        ("k", {"max_attempts": True}, "max_attempts"),
        ("k", {"timeout": 0}, "timeout"),
        ("k", {"backoff_base": -1}, "backoff_base"),
        ("k", {"jitter": 2}, "jitter"),
    ],
)
def test_bad_handler_options_are_refused(kind: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Registry().handler(kind, **options)


def test_a_kind_has_one_handler() -> None:
    reg = Registry()
    reg.handler("k")(lambda payload: None)
    with pytest.raises(ValueError, match="already has a handler"):
        reg.handler("k")(lambda payload: None)


def test_backoff_doubles_from_the_base_with_bounded_jitter_and_a_cap() -> None:
    reg = Registry()
    reg.handler("k", backoff_base=60, backoff_cap=600, jitter=0.1)(lambda p: None)
    spec = reg.get("k")
    assert spec is not None
    assert [spec.backoff(n, rand=lambda: 0.5) for n in (1, 2, 3, 4, 5)] == [
        60,
        120,
        240,
        480,
        600,
    ]
    assert spec.backoff(1, rand=lambda: 0.0) == pytest.approx(54)
    assert spec.backoff(1, rand=lambda: 1.0) == pytest.approx(66)
    assert spec.backoff(9, rand=lambda: 1.0) == 600  # jitter never pushes past the cap
    samples = [spec.backoff(2) for _ in range(200)]
    assert all(108 <= s <= 132 for s in samples) and len(set(samples)) > 1
    assert spec.backoff(10_000, rand=lambda: 0.5) == 600  # no overflow


def write_module(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(text)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_load_registry_by_module_and_by_attribute(on_path: Path) -> None:
    write_module(
        on_path,
        "wapp_ok",
        "from jobtui.registry import Registry\n"
        "registry = Registry()\nother = Registry()\n"
        "registry.handler('a')(lambda p: None)\nother.handler('b')(lambda p: None)\n",
    )
    assert load_registry("wapp_ok").kinds() == ["a"]
    assert load_registry("wapp_ok:other").kinds() == ["b"]
    assert load_registry("apps.basic").kinds() == ["once", "quick", "sleepy"]


@pytest.mark.parametrize(
    ("spec", "source", "message"),
    [
        (
            "wapp_missing_mod_zz",
            None,
            "cannot import app module 'wapp_missing_mod_zz': "
            "ModuleNotFoundError: No module named 'wapp_missing_mod_zz'",
        ),
        (
            "wapp_raises",
            "raise RuntimeError('no config\\nsecond line')",
            "cannot import app module 'wapp_raises': RuntimeError: no config second line",
        ),
        ("wapp_exits", "import sys\nsys.exit(2)", "SystemExit: 2"),
        ("wapp_syntax", "def broken(:\n", "SyntaxError"),
        ("wapp_noattr", "x = 1", "app module 'wapp_noattr' has no attribute 'registry'"),
        ("wapp_wrongtype:x", "x = [1]", "wapp_wrongtype:x is a list, not a jobtui Registry"),
        (
            "wapp_empty",
            "from jobtui.registry import Registry\nregistry = Registry()",
            "has no handlers",
        ),
        ("not a module", None, "invalid app"),
        ("", None, "invalid app"),
    ],
)
def test_load_registry_errors_are_one_clear_line(
    on_path: Path, spec: str, source: str | None, message: str
) -> None:
    if source is not None:
        write_module(on_path, spec.partition(":")[0], source)
    with pytest.raises(RegistryImportError) as info:
        load_registry(spec)
    text = str(info.value)
    assert message in text
    assert "\n" not in text and "Traceback" not in text
    sys.modules.pop(spec.partition(":")[0], None)
