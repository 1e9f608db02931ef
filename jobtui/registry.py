"""Handlers by job kind, and loading an application's registry by module name.

An application declares `registry = Registry()` and decorates its handlers with
`@registry.handler("kind", max_attempts=…, timeout=…)`; `jobtui worker myapp.jobs` finds it with
`load_registry("myapp.jobs")`. The registry only describes handlers: running them is the worker's.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _is_async(fn: Callable[..., Any]) -> bool:
    """True for `async def` functions, also behind functools.partial or an async `__call__`."""
    target: Any = fn
    while hasattr(target, "func") and not inspect.isfunction(target):  # functools.partial
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class HandlerSpec:
    """One kind's handler and the retry policy that goes with it.

    `max_attempts` None means "the job row's own max_attempts decides"; `timeout` None means no
    limit. Back-off after attempt n is `backoff_base * 2**(n-1)` seconds, ± `jitter` (a fraction),
    never more than `backoff_cap`.
    """

    kind: str
    fn: Callable[[Any], Any]
    is_async: bool
    max_attempts: int | None = None
    timeout: float | None = None
    backoff_base: float = 60.0
    backoff_cap: float = 3600.0
    jitter: float = 0.1

    def backoff(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retrying after failed attempt `attempt` (1-based)."""
        exponent = min(max(attempt, 1) - 1, 60)
        delay = min(self.backoff_cap, self.backoff_base * 2.0**exponent)
        if self.jitter:
            delay *= 1.0 + self.jitter * (2.0 * rand() - 1.0)
        return max(0.0, min(self.backoff_cap, delay))


# The largest back-off: a retry's run_at must stay a timestamp PostgreSQL (and Python) can
# hold, or the statement recording it would fail on every try and hold up every outcome.
MAX_BACKOFF_S = 10 * 365 * 86400.0
MAX_ATTEMPTS = 2**31 - 1  # the column is an integer


def _check_number(
    name: str,
    value: float,
    *,
    minimum: float,
    inclusive: bool = True,
    maximum: float = math.inf,
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{name} must be a number, not {value!r}")
    if value < minimum or (not inclusive and value == minimum):
        bound = f">= {minimum}" if inclusive else f"> {minimum}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")
    if value > maximum:
        raise ValueError(f"{name} must be at most {maximum:g}, not {value!r}")
    return float(value)


class Registry:
    """The handlers of one application, by kind."""

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    def handler(
        self,
        kind: str,
        *,
        max_attempts: int | None = None,
        timeout: float | None = None,
        backoff_base: float = 60.0,
        backoff_cap: float = 3600.0,
        jitter: float = 0.1,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of `kind`; it gets the payload.

        `async def` handlers run on the worker's event loop (cancelled with `task.cancel()`);
        plain functions run in threads and can poll `jobtui.worker.current_job().cancelled`.
        """
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("handler kind must be a non-empty string")
        if max_attempts is not None and (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= MAX_ATTEMPTS
        ):
            raise ValueError(
                f"max_attempts of {kind!r} must be an integer from 1 to {MAX_ATTEMPTS}"
            )
        if timeout is not None:
            _check_number(f"timeout of {kind!r}", timeout, minimum=0, inclusive=False)
        _check_number(f"backoff_base of {kind!r}", backoff_base, minimum=0, maximum=MAX_BACKOFF_S)
        _check_number(f"backoff_cap of {kind!r}", backoff_cap, minimum=0, maximum=MAX_BACKOFF_S)
        _check_number(f"jitter of {kind!r}", jitter, minimum=0)
        if jitter > 1:
            raise ValueError(f"jitter of {kind!r} must be a fraction between 0 and 1")

        def register(fn: F) -> F:
            if not callable(fn):
                raise TypeError(f"handler of {kind!r} must be callable")
            if kind in self._specs:
                raise ValueError(f"kind {kind!r} already has a handler")
            self._specs[kind] = HandlerSpec(
                kind=kind,
                fn=fn,
                is_async=_is_async(fn),
                max_attempts=max_attempts,
                timeout=None if timeout is None else float(timeout),
                backoff_base=float(backoff_base),
                backoff_cap=float(backoff_cap),
                jitter=float(jitter),
            )
            return fn

        return register

    def kinds(self) -> list[str]:
        """Every kind with a handler, sorted."""
        return sorted(self._specs)

    def get(self, kind: str) -> HandlerSpec | None:
        return self._specs.get(kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Registry(kinds={self.kinds()!r})"


class RegistryImportError(Exception):
    """The application's registry could not be loaded; str() is one line naming the cause."""


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" ({exc.filename}, line {exc.lineno})" if exc.filename else ""
        return f"SyntaxError: {exc.msg}{where}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_registry(spec: str) -> Registry:
    """Import `pkg.module` (attribute `registry`) or `pkg.module:attr` and return the Registry.

    The current directory is put on `sys.path`, as `python -m` would, so `jobtui worker
    myapp.jobs` finds the application it is started beside.
    """
    text = (spec or "").strip()
    module_name, _, attr = text.partition(":")
    module_name, attr = module_name.strip(), (attr.strip() or "registry")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise RegistryImportError(
            f"invalid app {spec!r}: use MODULE or MODULE:ATTR, e.g. myapp.jobs:registry"
        )
    if not all(part.isidentifier() for part in attr.split(".")):
        raise RegistryImportError(f"invalid attribute {attr!r} in app {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # app code may raise anything, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise RegistryImportError(
            f"cannot import app module {module_name!r}: {_one_line(exc)}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistryImportError(
                f"app module {module_name!r} has no attribute {attr!r}"
                + (" (name a Registry with MODULE:ATTR)" if attr == "registry" else "")
            ) from None
    if not isinstance(obj, Registry):
        raise RegistryImportError(
            f"{module_name}:{attr} is a {type(obj).__name__}, not a jobtui Registry"
        )
    if not len(obj):
        raise RegistryImportError(f"{module_name}:{attr} has no handlers registered")
    return obj
