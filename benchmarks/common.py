"""What every scenario shares: the server, fresh databases, the machine line, figures, processes.

A scenario gets a `Bench` (the server plus the run's options) and returns `Figure`s; the runner
prints them as they come and again as one table at the end.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "public"


class ScenarioSkipped(Exception):
    """A scenario (or one system inside it) cannot run here; the message says why."""


# ---------------------------------------------------------------------------------------------
# Figures


@dataclass
class Figure:
    """One measured quantity over several runs, with its target."""

    scenario: str
    label: str
    unit: str
    values: list[float]
    target: str = ""
    # Given the median, is the target met? None when there is no target (report only).
    check: Callable[[float], bool] | None = None
    note: str = ""
    digits: int = 1

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def met(self) -> bool | None:
        if self.check is None or not self.values:
            return None
        return self.check(self.median)

    def fmt(self, v: float) -> str:
        if abs(v) >= 1000:
            return f"{v:,.0f}".replace(",", " ")
        return f"{v:.{self.digits}f}"

    def summary(self) -> str:
        if not self.values:
            return "n/a"
        lo, hi = min(self.values), max(self.values)
        text = f"{self.fmt(self.median)} {self.unit}"
        if len(self.values) > 1:
            text += f" [{self.fmt(lo)}–{self.fmt(hi)}] (n={len(self.values)})"
        return text

    def verdict(self) -> str:
        met = self.met
        if met is None:
            return ""
        return "met" if met else "MISSED"

    def line(self) -> str:
        parts = [f"  {self.label:<44} {self.summary()}"]
        if self.target:
            parts.append(f"target {self.target}: {self.verdict()}")
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)


def at_most(limit: float) -> Callable[[float], bool]:
    return lambda v: v <= limit


def at_least(limit: float) -> Callable[[float], bool]:
    return lambda v: v >= limit


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank-with-interpolation percentile (p in 0..100)."""
    if not values:
        return float("nan")
    data = sorted(values)
    k = (len(data) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


# ---------------------------------------------------------------------------------------------
# Server and databases


def with_db(dsn: str, dbname: str) -> str:
    return conninfo.make_conninfo(dsn, dbname=dbname)


@dataclass
class Bench:
    """The server all scenarios share, and the options of this run."""

    admin_dsn: str
    quick: bool
    runs: int | None
    origin: str  # "embedded" or "JOBTUI_BENCH_DSN"
    peers: bool = True
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jobtui-bench-")))
    templates: dict[str, str] = field(default_factory=dict)

    def n_runs(self, default: int) -> int:
        return self.runs if self.runs else default

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_dsn, autocommit=True)

    @contextlib.contextmanager
    def fresh_db(
        self, label: str, *, migrate: bool = True, template: str | None = None
    ) -> Iterator[str]:
        """A new database (migrated, or copied from `template`), dropped afterwards."""
        name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
        with self.admin() as admin:
            if template:
                try:
                    admin.execute(
                        f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY'
                    )
                except psycopg.errors.SyntaxError:  # PostgreSQL before 15: no STRATEGY
                    admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            else:
                admin.execute(f'CREATE DATABASE "{name}"')
        dsn = with_db(self.admin_dsn, name)
        try:
            if migrate and not template:
                from jobtui.schema import migrate as run_migrate

                with psycopg.connect(dsn, autocommit=True) as conn:
                    run_migrate(conn, SCHEMA)
            yield dsn
        finally:
            self.drop(name)

    def drop(self, name: str) -> None:
        with self.admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def template(self, key: str, build: Callable[[str], None]) -> str:
        """Name of a database built once per run by `build(dsn)` and then copied."""
        if key not in self.templates:
            name = f"bench_tpl_{key}_{uuid.uuid4().hex[:8]}"
            with self.admin() as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                build(with_db(self.admin_dsn, name))
            except BaseException:
                self.drop(name)
                raise
            self.templates[key] = name
        return self.templates[key]

    def cleanup(self) -> None:
        for name in self.templates.values():
            with contextlib.suppress(psycopg.Error):
                self.drop(name)
        self.templates.clear()


def machine_line(bench: Bench) -> str:
    with bench.admin() as conn:
        row = conn.execute("SHOW server_version").fetchone()
    version = row[0] if row else "?"
    return (
        f"machine: {os.cpu_count()} cores, PostgreSQL {version} ({bench.origin}), "
        f"Python {sys.version.split()[0]}"
    )


def analyze(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")


# ---------------------------------------------------------------------------------------------
# Calling APIs that may be sync or async


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn`; when it returns an awaitable (async API), run it to completion."""
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        import asyncio

        async def _await() -> Any:
            return await result

        return asyncio.run(_await())
    return result


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)


# ---------------------------------------------------------------------------------------------
# Child processes (workers, consoles) that we start and must always end


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def spawn(cmd: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    """Start a child in its own process group with output to `log`."""
    out = open(log, "ab")  # noqa: SIM115 - closed with the process by stop()
    return subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=child_env(**env),
        cwd=ROOT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; only the process (group) we started."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


def tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.05,
    procs: Sequence[tuple[subprocess.Popen[bytes], Path]] = (),
) -> None:
    """Poll `predicate` until true; fail clearly on timeout or when a child died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for proc, log in procs:
            if proc.poll() is not None:
                raise ScenarioSkipped(f"{what}: a child exited ({proc.returncode}): {tail(log, 1)}")
        time.sleep(interval)
    detail = "; ".join(dict.fromkeys(tail(log, 1) for _, log in procs))
    raise ScenarioSkipped(f"{what}: timed out after {timeout:.0f}s {detail}".strip())


def server_pids(bench: Bench) -> set[int]:
    """The embedded server's postmaster and its children (empty for JOBTUI_BENCH_DSN)."""
    pid_file = bench.tmp / "pg" / "postmaster.pid"
    try:
        postmaster = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return set()
    pids = {postmaster}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as fh:
                    for line in fh:
                        if line.startswith("PPid:"):
                            if int(line.split()[1]) == postmaster:
                                pids.add(int(entry))
                            break
            except OSError:
                continue
    return pids


def cpu_seconds(pids: set[int]) -> float:
    """User + system CPU seconds used so far by these processes (those still alive)."""
    hz = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / hz


def rss_kb(pid: int | None = None) -> int:
    """Resident set size in kB from /proc (VmRSS)."""
    path = f"/proc/{pid or 'self'}/status"
    with open(path) as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
