"""Bytes the console writes to its terminal per second while idle (120×40, 2 s refresh).

The real `jobtui` console runs in a pseudo-terminal whose size is set with TIOCSWINSZ before it
starts; the start-up output is read and discarded, then every byte it writes is counted for a
fixed window while nobody touches a key. `ConsolePty` is also what console_memory drives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from types import TracebackType

from benchmarks import bigdata
from benchmarks.common import Bench, Figure, ScenarioSkipped, at_most, child_env

COLS, ROWS = 120, 40


def console_argv(dsn: str, refresh: float = 2.0) -> list[str]:
    """`jobtui` arguments that open the console."""
    return ["--dsn", dsn, "console", "--refresh", f"{refresh:g}s"]


def console_command(dsn: str, refresh: float = 2.0) -> list[str]:
    argv = console_argv(dsn, refresh)
    code = f"import sys; from jobtui.cli import main; sys.exit(main({argv!r}))"
    return [sys.executable, "-c", code]


class ConsolePty:
    """The console in a pty of COLS×ROWS; read() keeps its output flowing."""

    def __init__(
        self, dsn: str, cols: int = COLS, rows: int = ROWS, cmd: list[str] | None = None
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = child_env(TERM="xterm-256color", COLORTERM="truecolor")
        for name in ("COLUMNS", "LINES", "NO_COLOR", "TEXTUAL"):
            env.pop(name, None)

        def controlling_tty() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            cmd or console_command(dsn),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=controlling_tty,
            close_fds=True,
        )
        os.close(slave)
        self.tail = b""
        self.captured: bytearray | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read_for(self, seconds: float) -> int:
        """Read (and count) output for `seconds`; fail if the console exits."""
        total = 0
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    self._died()
                total += len(chunk)
                self.tail = (self.tail + chunk)[-4000:]
                if self.captured is not None:
                    self.captured += chunk
            elif self.proc.poll() is not None:
                self._died()
        return total

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def _died(self) -> None:
        self.proc.poll()
        text = self.tail.decode(errors="replace")
        plain = " ".join("".join(c if c.isprintable() else " " for c in text).split())
        raise ScenarioSkipped(f"the console exited ({self.proc.returncode}): {plain[-300:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, 15)
            deadline = time.monotonic() + 5
            while self.proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(ScenarioSkipped):
                    self.read_for(0.1)
            if self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
        with contextlib.suppress(OSError):
            os.close(self.master)

    def __enter__(self) -> ConsolePty:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_MOVE = re.compile(rb"\x1b\[(\d+);\d+H")


def rows_written(data: bytes) -> str:
    """Bytes written after cursor moves to each row: which part of the screen keeps changing."""
    per_row: dict[int, int] = {}
    moves = list(_MOVE.finditer(data))
    for i, m in enumerate(moves):
        end = moves[i + 1].start() if i + 1 < len(moves) else len(data)
        row = int(m.group(1))
        per_row[row] = per_row.get(row, 0) + end - m.start()
    return ", ".join(f"{row}: {n}" for row, n in sorted(per_row.items())) or "none"


def run(bench: Bench) -> list[Figure]:
    """One console start; the idle window is read as three consecutive parts (the runs)."""
    startup = bench.scale(10, 6)
    part = bench.scale(10, 4)
    parts = max(3, bench.n_runs(3))
    rates = []
    with (
        bench.fresh_db("console_bytes", template=bigdata.template(bench)) as dsn,
        ConsolePty(dsn) as console,
    ):
        first = console.read_for(startup)
        console.captured = bytearray()
        for _ in range(parts):
            rates.append(console.read_for(part) / part)
        captured = bytes(console.captured)
    print(
        f"    start-up {first} bytes in {startup}s (discarded); idle {len(captured)} bytes "
        f"in {parts}×{part}s = {len(captured) / (parts * part):.0f} B/s",
        flush=True,
    )
    print(
        f"    idle bytes by screen row (after cursor moves to it): {rows_written(captured)}",
        flush=True,
    )
    return [
        Figure(
            "console_bytes",
            f"console idle output in a bare pty (answers no queries) {COLS}×{ROWS}, 2 s refresh",
            "B/s",
            rates,
            target="≤ 2 048 B/s",
            check=at_most(2048),
            digits=0,
            note=f"{parts} consecutive {part} s windows",
        ),
    ]
