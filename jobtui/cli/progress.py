"""A progress bar for long CLI operations, shown only where a person is watching.

Bars go to stderr and only when it is a terminal and the set is large, so scripts and pipes
see nothing but the final count on stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SHOW_FROM = 1000  # smaller sets finish before a bar would be readable


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[..., None]]:
    """Yield `update(done)`; draws a Rich bar on a terminal when `total` is large."""
    if not sys.stderr.isatty() or (total is not None and total < SHOW_FROM):
        yield lambda *_args, **_kw: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False)
    with Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)

        def update(done: object = None, *_args: object, **_kw: object) -> None:
            if isinstance(done, int):
                bar.update(task, completed=done)

        yield update
