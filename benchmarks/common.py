"""What every scenario shares: the server, fresh databases, the machine line, figures, processes.

A scenario gets a `Bench` (the server plus the run's options) and returns `Figure`s; the runner
prints them as they come and again as one table at the end.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import platform
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
    # Which system the figure belongs to (the performance table's column) and what is measured
    # (its row); generated tables group figures by these.
    system: str = "jobtui"
    metric: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The figure as the results JSON stores it: every run's raw value, not only the median."""
        return {
            "scenario": self.scenario,
            "label": self.label,
            "metric": self.metric or self.label,
            "system": self.system,
            "unit": self.unit,
            "values": list(self.values),
            "median": self.median if self.values else None,
            "min": min(self.values) if self.values else None,
            "max": max(self.values) if self.values else None,
            "target": self.target,
            "met": self.met,
            "note": self.note,
            "digits": self.digits,
        }

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
    # --peers: only these peers run beside jobtui (the matrix: PgQueuer); empty means every peer.
    peer_names: list[str] = field(default_factory=list)
    # A peer whose package is not installed is skipped instead of failing the run.
    allow_missing_peers: bool = False
    # The scaling matrix: worker processes and ready backlogs the drain (and, for workers,
    # the pickup latency) run at. Empty means the scenario's default.
    workers: list[int] = field(default_factory=list)
    backlogs: list[int] = field(default_factory=list)
    # Raw per-run records (each drain and latency run), settings per system; the results JSON.
    records: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Failures inside a scenario that let it go on (one system of three failed): the run still
    # ends non-zero.
    failures: list[str] = field(default_factory=list)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jobtui-bench-")))
    templates: dict[str, str] = field(default_factory=dict)

    def fail(self, message: str) -> None:
        """Record a failure that must make the run exit non-zero, and say so now."""
        self.failures.append(message)
        print(f"  FAILED: {message}", flush=True)

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


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("?" where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or "?"


def machine_info(bench: Bench) -> dict[str, Any]:
    """What the figures depend on, for the results JSON and the line beside the table."""
    with bench.admin() as conn:
        row = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model(),
        "postgresql": row[0] if row else "?",
        "postgresql_source": bench.origin,
        "synchronous_commit": sync[0] if sync else "?",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def describe_machine(info: dict[str, Any]) -> str:
    return (
        f"machine: {info['cores']} cores ({info['cpu_model']}), PostgreSQL {info['postgresql']} "
        f"({info['postgresql_source']}, synchronous_commit {info['synchronous_commit']}), "
        f"Python {info['python']}"
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


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def postmaster_pid(bench: Bench) -> int | None:
    """The server's postmaster when it runs on this machine (embedded, or a local
    JOBTUI_BENCH_DSN): the parent of our own backend. None when it is not visible here."""
    with bench.admin() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        backend = int(row[0]) if row else 0
        parent = _ppid(backend)
    if parent is None:
        return None
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return None
    return parent if b"postgres" in cmdline else None


def cpu_by_pid(pids: set[int]) -> dict[int, float]:
    """User + system CPU seconds used so far by each of these processes (those still alive)."""
    hz = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / hz
    return found


class CpuSplit:
    """CPU seconds the server and the workers use over a window.

    `sample()` is called often during the window (the drain's poll does): backends that start
    during it are found by listing the postmaster's children again (and the workers' children,
    should a worker start any), and a process that ends
    keeps the CPU it had at its last sample. Baselines are taken at `start()`; a process first
    seen later counts from zero (it started inside the window).
    """

    def __init__(self, bench: Bench, workers: set[int]) -> None:
        self.bench = bench
        self.postmaster = postmaster_pid(bench)
        self.roots = set(workers)
        self.workers = set(workers)
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.server: set[int] = set()
        self._listed = 0.0

    @property
    def available(self) -> bool:
        return self.postmaster is not None

    def _list(self) -> None:
        """The server's processes and the workers' with any children they started."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                parent = _ppid(int(entry))
                if parent is not None:
                    parents[int(entry)] = parent
        if self.postmaster is not None:
            self.server |= {self.postmaster} | {
                p for p, parent in parents.items() if parent == self.postmaster
            }
        grew = True
        while grew:
            more = {p for p, parent in parents.items() if parent in self.workers}
            grew = not more <= self.workers
            self.workers |= more

    def start(self) -> None:
        self._list()
        self.base = cpu_by_pid(self.server | self.workers)
        self.last = dict(self.base)
        self._listed = time.monotonic()

    def sample(self) -> None:
        if time.monotonic() - self._listed > 0.25:
            self._list()
            self._listed = time.monotonic()
        self.last.update(cpu_by_pid(self.server | self.workers))

    def split(self) -> dict[str, float]:
        self.sample()

        def used(pids: set[int]) -> float:
            return sum(self.last.get(p, 0.0) - self.base.get(p, 0.0) for p in pids)

        return {"server_cpu_s": used(self.server), "workers_cpu_s": used(self.workers)}


def rss_kb(pid: int | None = None) -> int:
    """Resident set size in kB from /proc (VmRSS)."""
    path = f"/proc/{pid or 'self'}/status"
    with open(path) as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def record_entry(path: Path, key: str, run: dict[str, Any]) -> None:
    """`run` under `key` of the results JSON at `path`, the rest of the file as it was (a script's
    `--record`; benchmarks/run.py keeps the entry when it rewrites the file)."""
    data = json.loads(path.read_text())
    data[key] = run
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")  # as run.py writes it
