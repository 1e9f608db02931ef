"""Handlers by job kind, and loading an application's registry by module name.

An application declares `registry = Registry()` and decorates its handlers with
`@registry.handler("kind", max_attempts=…, timeout=…)`; `jobtui worker myapp.jobs` finds it with
`load_registry("myapp.jobs")`. The registry only describes handlers, their limits
(`concurrency=`, `per_worker=`, `rate=` on the handler) and schedules (`@registry.periodic`,
`registry.schedule`): running them, syncing those to the database and enforcing them is the
worker's. Every declaration is checked when it is made, so a mistake fails at import.
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

from jobtui.limits import InvalidLimit, KindLimit
from jobtui.schedules import InvalidSchedule, Schedule

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
        self._limits: dict[str, KindLimit] = {}
        self._schedules: dict[str, Schedule] = {}
        self._kind_of: dict[int, str] = {}  # id(handler function) -> its kind
        self._pending: dict[int, list[dict[str, Any]]] = {}  # periodic below handler

    def handler(
        self,
        kind: str,
        *,
        max_attempts: int | None = None,
        timeout: float | None = None,
        backoff_base: float = 60.0,
        backoff_cap: float = 3600.0,
        jitter: float = 0.1,
        concurrency: int | None = None,
        per_worker: int | None = None,
        rate: str | int | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of `kind`; it gets the payload.

        `async def` handlers run on the worker's event loop (cancelled with `task.cancel()`);
        plain functions run in threads and can poll `jobtui.worker.current_job().cancelled`.
        Limits, enforced at claim time across every worker (jobtui.limits): `concurrency` jobs
        of this kind running at once, `per_worker` on one worker, `rate` starts per second or
        minute ("100/m", "5/s"; an int is per second). An operator can override them.
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
        try:
            limit = KindLimit.declared(
                kind, concurrency=concurrency, per_worker=per_worker, rate=rate
            )
        except InvalidLimit as exc:
            raise ValueError(f"limits of {kind!r}: {exc}") from None

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
            self._limits[kind] = limit
            self._kind_of[id(fn)] = kind
            for declared in self._pending.pop(id(fn), []):
                self._add_schedule(Schedule.periodic(kind, **declared))
            return fn

        return register

    def periodic(
        self,
        cron: str,
        *,
        timezone: str = "UTC",
        missed: str = "skip",
        name: str | None = None,
        payload: Any = None,
    ) -> Callable[[F], F]:
        """Enqueue a job of the decorated handler's kind on a cron schedule (five fields, in
        `timezone`). Each tick is enqueued once however many workers run (jobtui.schedules);
        `missed` ("skip" or "latest") says what happens to ticks missed while no worker ran.
        The schedule is named after the kind unless `name` is given (needed when one kind has
        several). Goes above or below `@registry.handler`."""
        declared = {
            "cron_expr": cron,
            "timezone": timezone,
            "missed": missed,
            "name": name,
            "payload": payload,
        }
        # Fail now, at the declaration (the kind is not known yet: any valid one will do).
        Schedule.periodic("periodic", **{**declared, "name": name or f"periodic {cron!r}"})

        def register(fn: F) -> F:
            kind = self._kind_of.get(id(fn))
            if kind is None:
                self._pending.setdefault(id(fn), []).append(declared)
            else:
                self._add_schedule(Schedule.periodic(kind, **declared))
            return fn

        return register

    def schedule(
        self,
        name: str,
        cron: str,
        kind: str,
        payload: Any = None,
        *,
        timezone: str = "UTC",
        missed: str = "skip",
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Schedule:
        """Enqueue a job of `kind` with `payload` on a cron schedule; see `periodic`. The kind
        needs a handler in this registry by the time a worker starts."""
        extra: dict[str, Any] = {} if max_attempts is None else {"max_attempts": max_attempts}
        sched = Schedule(
            name=name,
            cron=cron,
            kind=kind,
            payload={} if payload is None else payload,
            timezone=timezone,
            missed=missed,
            priority=priority,
            **extra,
        )
        self._add_schedule(sched)
        return sched

    def _add_schedule(self, sched: Schedule) -> None:
        if sched.name in self._schedules:
            raise InvalidSchedule(
                f"schedule {sched.name!r} is declared twice (give each one its own name=)"
            )
        self._schedules[sched.name] = sched

    def schedules(self) -> list[Schedule]:
        """Every declared schedule, by name. Raises ValueError for a schedule whose kind has
        no handler, or a `periodic` on a function that never became a handler."""
        if self._pending:
            raise InvalidSchedule("@registry.periodic decorates a function that is not a handler")
        for sched in self._schedules.values():
            if sched.kind not in self._specs:
                raise InvalidSchedule(
                    f"schedule {sched.name!r}: kind {sched.kind!r} has no handler"
                )
        return [self._schedules[n] for n in sorted(self._schedules)]

    def limits(self) -> list[KindLimit]:
        """The declared limits of every kind (all-None for a kind without limits), by kind."""
        return [self._limits[k] for k in sorted(self._limits)]

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
