"""One claimed job while its handler runs, and running that handler.

Promises kept: a job is only charged for time its handler really ran (a plain handler's
timeout starts when its thread starts, never while it waits for one), and a plain handler
that overruns its timeout or ignores a cancel keeps counting against capacity (`Threads`)
until its thread really ends, so it cannot starve the jobs claimed after it; its job keeps
its row locked meanwhile (`Running.thread`, the dispatcher's `lingering`), so it counts toward
its kind's concurrency limit too and never runs again while that thread still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from jobtui.registry import HandlerSpec
from jobtui.worker.context import JobContext, set_current

log = logging.getLogger("jobtui.worker")


class Running:
    """One claimed job while its handler runs; `key` is (id, attempt)."""

    __slots__ = (
        "attempt",
        "claimed_at",
        "ctx",
        "id",
        "key",
        "payload",
        "ran",
        "spec",
        "started",
        "task",
        "thread",
        "timed_out",
        "why",
    )

    def __init__(
        self, row: tuple[Any, ...], spec: HandlerSpec, worker_id: str, claimed_at: float
    ) -> None:
        self.id: int = row[0]
        self.payload: Any = row[2]
        self.attempt: int = row[3]
        self.key = (self.id, self.attempt)
        self.spec = spec
        # row[4] is the effective max_attempts, written into the row by the claim.
        self.ctx = JobContext(row[0], row[1], row[3], row[4], worker_id=worker_id)
        self.claimed_at = claimed_at
        self.started = False
        self.ran = False  # its handler was called (not stopped before it started)
        self.timed_out = False
        self.task: asyncio.Task[None] | None = None
        # A plain handler's thread that overran its timeout or ignored a stop: still running.
        self.thread: Future[Any] | None = None
        # Why the worker stopped it: None, "cancel" (operator), "shutdown" or "lost".
        self.why: str | None = None

    def interrupt(self, why: str) -> bool:
        """Ask the handler to stop (event; `task.cancel()` for coroutines); False if already."""
        if self.why is not None:
            return False
        self.why = why
        self.ctx.cancelled.set()
        if self.started and self.spec.is_async and self.task is not None:
            self.task.cancel()
        return True


class Threads:
    """Threads of plain handlers the worker stopped waiting for but that still run."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.abandoned = 0
        self._on_change = on_change

    def abandon(self, future: Future[Any]) -> None:
        self.abandoned += 1
        loop = asyncio.get_running_loop()

        def ended(_: Future[Any]) -> None:
            # RuntimeError: the worker's loop is gone, nothing left to count.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._ended)

        future.add_done_callback(ended)

    def _ended(self) -> None:
        self.abandoned -= 1
        log.info("event=abandoned_thread_ended abandoned=%d", self.abandoned)
        self._on_change()


async def run_handler(
    job: Running, executor: ThreadPoolExecutor | None, threads: Threads
) -> BaseException | None:
    """Run the job's handler under its timeout; the exception it ended with, if any."""
    spec = job.spec
    set_current(job.ctx)
    try:
        if spec.is_async:
            if spec.timeout is None:
                await spec.fn(job.payload)
            else:
                limit = asyncio.timeout(spec.timeout)
                try:
                    async with limit:
                        await spec.fn(job.payload)
                finally:
                    job.timed_out = limit.expired()
        else:
            assert executor is not None
            await _run_plain(job, executor, threads)
    except BaseException as exc:  # noqa: BLE001 - handlers may raise anything
        return exc
    return None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _run_plain(job: Running, executor: ThreadPoolExecutor, threads: Threads) -> None:
    spec = job.spec
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()

    def call() -> Any:
        # A stop asked while the job waited for a thread: its handler never starts.
        if job.ctx.cancelled.is_set():
            raise asyncio.CancelledError
        return context.run(spec.fn, job.payload)

    started: asyncio.Future[None] | None = None
    if spec.timeout is not None:
        started = loop.create_future()
        go = started

        def timed() -> Any:
            loop.call_soon_threadsafe(_resolve, go)
            return call()

        cf = executor.submit(timed)
    else:
        cf = executor.submit(call)
    try:
        if started is None:
            result = await asyncio.wrap_future(cf)
            if inspect.isawaitable(result):  # a plain function that returned a coroutine
                await result
        else:
            await started  # waiting for a thread is not the job's time
            limit = asyncio.timeout(spec.timeout)
            try:
                async with limit:
                    result = await asyncio.wrap_future(cf)
                    if inspect.isawaitable(result):
                        await result
            finally:
                job.timed_out = limit.expired()
    except BaseException:
        job.ctx.cancelled.set()  # timeout or forced stop: tell the thread to give up
        if not cf.cancel() and not cf.done():
            threads.abandon(cf)
            job.thread = cf
            log.warning(
                "worker=%s event=abandoned job=%d attempt=%d reason=%s",
                job.ctx.worker_id,
                job.id,
                job.attempt,
                "timeout" if job.timed_out else (job.why or "stopped"),
            )
        raise
