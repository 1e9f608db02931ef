"""Bytes the console writes to a real terminal while idle, per tab, measured through tmux.

The pty harness of console_bytes.py answers no terminal queries; a person's terminal does, and
the console then behaves differently. Here the real console (`jobtui console --refresh 2s`) runs
in a tmux pane of COLS×ROWS (`new-session -d -x COLS -y ROWS`, status line off so the pane is the
whole size, TERM as tmux sets it), on its own tmux server socket so no one else's sessions are
touched. After start-up, `pipe-pane -o 'cat >> FILE'` copies every byte the console writes to
the pane into FILE. For each tab (1 Overview … 6 Database) the tab's key is
sent, the redraw it causes is waited out (`settle`), and then FILE's growth over `windows`
windows of `window` seconds with no key pressed gives B/s.

`--live` adds a worker processing a trickle of no-op jobs (2 a second by default) while it is
measured. `--demo` measures `jobtui demo` as shipped instead (its embedded server, worker,
trickle of jobs and console, in a fresh --data-dir): the figure the README calls "live demo".
`--short` is a quick form for a test: 80×24, one 5 s window per tab. `--record RESULTS` puts the
demo's figures into a results JSON in place of the live ones there (benchmarks/table.py then
writes docs/performance.md from it). `--kind-keys N` times, N times each, Enter on the
Overview's first kind and the kind screen's `t`, `t`, `j`, `d` and esc, from the key to the
first sign on screen and to its data (capture-pane polled every few ms).

    python benchmarks/console_tmux.py                  # 80×24 and 120×40, idle, 3×10 s per tab
    python benchmarks/console_tmux.py --live           # … with a worker and a trickle of jobs
    python benchmarks/console_tmux.py --idle-and-demo --sizes 80x24 --window 20 --windows 5 \
        --record benchmarks/results.json               # the per-tab idle and live table (median
                                                       # and max of 5×20 s); the docs' live row
    python benchmarks/console_tmux.py --dsn postgresql://…/big --kind-keys 5
                                                       # the kind screen's keys, key → screen ms
    python benchmarks/console_tmux.py --short --json   # ~40 s; one JSON line for a test
    python benchmarks/console_tmux.py --dsn postgresql://…/db   # an existing jobtui database

Without --dsn it uses JOBTUI_BENCH_DSN (or an embedded server) and a fresh copy of the benchmark
data set (`--data quick`: 50 000 finished jobs, 5 000 ready, 5 000 dead letters; `full`: the
1 000 000-row set of the read scenarios), dropped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Bench, Figure, ScenarioSkipped, at_most, child_env, spawn, stop
from benchmarks.console_bytes import console_command, rows_written

TABS = {
    "1": "Overview",
    "2": "Jobs",
    "3": "Dead letters",
    "4": "Workers",
    "5": "Schedules",
    "6": "Database",
}
IDLE_TARGET = 500.0  # B/s, issue 11
LIVE_TARGET = 2048.0
DEMO_TARGET = 1024.0  # B/s under `jobtui demo`, every tab at 80x24 (issue 26 item 13)


@dataclass
class TabBytes:
    """Bytes per second of one tab at one size, one value per window."""

    size: str
    tab: str
    live: bool
    rates: list[float] = field(default_factory=list)
    rows: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "tab": self.tab,
            "live": self.live,
            "rates": self.rates,
            "median": statistics.median(self.rates) if self.rates else None,
        }


class TmuxConsole:
    """The console in a detached tmux pane on a private tmux server; `close()` ends both."""

    def __init__(
        self,
        dsn: str,
        cols: int,
        rows: int,
        workdir: Path,
        refresh: float,
        command: list[str] | None = None,
    ) -> None:
        if shutil.which("tmux") is None:
            raise ScenarioSkipped("tmux is not installed (apt-get install tmux)")
        self.socket = f"jobtui-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.workdir = workdir
        self.capture = workdir / f"pane-{cols}x{rows}-{uuid.uuid4().hex[:6]}.bytes"
        config = workdir / f"tmux-{self.socket}.conf"
        # No user config (-f); the pane is exactly COLS×ROWS (no status line); a terminal type
        # with 256 colours as a person's tmux usually has; keep a dead pane to read its error.
        config.write_text(
            "set -g status off\n"
            "set -g default-terminal tmux-256color\n"
            "set -g remain-on-exit on\n"
            f"set -g default-size {cols}x{rows}\n"
        )
        env = child_env()
        for name in ("COLUMNS", "LINES", "NO_COLOR", "TEXTUAL", "TMUX", "TMUX_PANE"):
            env.pop(name, None)
        self.env = env
        argv = command or console_command(dsn, refresh)
        command_line = " ".join(shlex.quote(a) for a in argv)
        try:
            self._tmux(
                "-f", str(config), "new-session", "-d", "-s", "bench",
                "-x", str(cols), "-y", str(rows), "-c", str(Path.cwd()), command_line,
            )  # fmt: skip
        except ScenarioSkipped:
            self._remove_socket()
            raise
        self.pane_pid = int(self._tmux("display-message", "-p", "-t", "bench", "#{pane_pid}"))
        size = self._tmux("display-message", "-p", "-t", "bench", "#{pane_width}x#{pane_height}")
        if size != f"{cols}x{rows}":
            self.close()
            raise ScenarioSkipped(f"tmux made the pane {size}, not {cols}x{rows}")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=20,
        )
        if done.returncode != 0:
            raise ScenarioSkipped(f"tmux {args[0]}: {done.stderr.strip() or done.returncode}")
        return done.stdout.strip()

    def check_alive(self) -> None:
        if self._tmux("display-message", "-p", "-t", "bench", "#{pane_dead}") == "1":
            screen = " ".join(self._tmux("capture-pane", "-p", "-t", "bench").split())
            raise ScenarioSkipped(f"the console exited: {screen[-300:]}")

    def start_capture(self) -> None:
        self.capture.touch()
        self._tmux("pipe-pane", "-o", "-t", "bench", f"cat >> {shlex.quote(str(self.capture))}")

    def captured(self) -> int:
        try:
            return self.capture.stat().st_size
        except FileNotFoundError:
            return 0

    def press(self, key: str) -> None:
        self._tmux("send-keys", "-t", "bench", "-l", key)

    def send(self, *keys: str) -> None:
        """One `send-keys` of tmux key names and words (`/`, `kind:x`, `Enter`, `C-u`): the
        keys reach the console in one burst, as a paste or a slow SSH link delivers them."""
        self._tmux("send-keys", "-t", "bench", *keys)

    def screen(self) -> list[str]:
        """The pane as it shows now, one string per row."""
        return self._tmux("capture-pane", "-p", "-t", "bench").splitlines()

    def close(self) -> None:
        with contextlib.suppress(ScenarioSkipped, subprocess.TimeoutExpired):
            self._tmux("kill-server")
        # The console gets SIGHUP from tmux; make sure the process we started is gone. A demo
        # first stops its worker (up to 8 s) and its embedded server: a kill sooner leaves the
        # server running.
        deadline = time.monotonic() + 30
        while _alive(self.pane_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(self.pane_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pane_pid, signal.SIGKILL)
        with contextlib.suppress(FileNotFoundError):
            self.capture.unlink()
        self._remove_socket()

    def _remove_socket(self) -> None:
        """kill-server (or a server that failed to start) leaves its socket file behind."""
        tmpdir = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
        with contextlib.suppress(FileNotFoundError):
            (tmpdir / self.socket).unlink()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextlib.contextmanager
def trickle(dsn: str, workdir: Path, per_second: float) -> Iterator[None]:
    """A `jobtui worker` and a producer enqueuing no-op jobs at `per_second`: the live demo."""
    from benchmarks.systems import worker_command
    from jobtui.enqueue import enqueue

    log = workdir / f"live-worker-{uuid.uuid4().hex[:6]}.log"
    worker = spawn(worker_command(dsn, 10), log)
    stopping = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        import psycopg

        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not stopping.wait(1 / per_second):
                    enqueue(conn, "noop", {})
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(exc)

    producer = threading.Thread(target=produce, name="trickle", daemon=True)
    producer.start()
    try:
        yield
        if errors:
            raise ScenarioSkipped(f"the trickle producer failed: {errors[0]}")
        if worker.poll() is not None:
            raise ScenarioSkipped(f"the live worker exited ({worker.returncode})")
    finally:
        stopping.set()
        producer.join(5)
        stop(worker)


def measure(
    dsn: str,
    cols: int,
    rows: int,
    *,
    tabs: str = "123456",
    startup: float = 10.0,
    settle: float = 4.0,
    window: float = 10.0,
    windows: int = 3,
    live: bool = False,
    per_second: float = 2.0,
    refresh: float = 2.0,
    workdir: Path | None = None,
    by_row: bool = False,
    demo: bool = False,
) -> list[TabBytes]:
    """B/s the console writes to a tmux pane of cols×rows, per tab, with no key pressed."""
    own_dir = workdir is None
    work = workdir or Path(tempfile.mkdtemp(prefix="jobtui-tmux-"))
    results: list[TabBytes] = []
    try:
        with contextlib.ExitStack() as stack:
            if live:
                stack.enter_context(trickle(dsn, work, per_second))
            command = demo_command(work / f"demo-{uuid.uuid4().hex[:6]}") if demo else None
            console = TmuxConsole(dsn, cols, rows, work, refresh, command)
            stack.callback(console.close)
            time.sleep(startup)
            console.check_alive()
            console.start_capture()
            for key in tabs:
                got = TabBytes(f"{cols}x{rows}", TABS.get(key, key), live or demo)
                console.press(key)
                time.sleep(settle)
                start = console.captured()
                before = start
                for _ in range(windows):
                    time.sleep(window)
                    now = console.captured()
                    got.rates.append((now - before) / window)
                    before = now
                console.check_alive()
                if by_row:
                    with open(console.capture, "rb") as fh:
                        fh.seek(start)
                        got.rows = rows_written(fh.read(before - start))
                results.append(got)
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
    return results


def demo_command(data_dir: Path) -> list[str]:
    """`jobtui demo` as a newcomer runs it, in a directory of its own."""
    return [sys.executable, "-m", "jobtui", "demo", "--data-dir", str(data_dir)]


def print_table(results: list[TabBytes]) -> None:
    """The per-tab table the issue asks for: idle and live B/s side by side, each the median
    of the windows and, after it, the loudest window."""
    sizes = sorted({r.size for r in results})
    for size in sizes:
        print(f"\n  {size}: B/s per tab, median (max) of the windows")
        print(f"    {'tab':<13} {'idle':>13} {'live':>13}")
        for tab in TABS.values():
            cells = []
            for live in (False, True):
                found = [r for r in results if r.size == size and r.tab == tab and r.live == live]
                rates = found[0].rates if found else []
                cells.append(
                    f"{statistics.median(rates):,.0f} ({max(rates):,.0f})" if rates else "–"
                )
            print(f"    {tab:<13} {cells[0]:>13} {cells[1]:>13}")


def print_results(results: list[TabBytes]) -> None:
    for r in results:
        mode = "live" if r.live else "idle"
        values = ", ".join(f"{v:.0f}" for v in r.rates)
        median = TabBytes.to_dict(r)["median"]
        print(f"    {mode} {r.size:>7} {r.tab:<13} {median:8.0f} B/s  (windows: {values})")
        if r.rows:
            print(f"      bytes by screen row: {r.rows}")


# ---------------------------------------------------------------------------------------------
# As a scenario of run.py


def plan(bench: Bench) -> list[tuple[int, int, str, int, float]]:
    """(cols, rows, mode, windows, window s) the scenario measures; mode "idle" (the data set,
    no worker) or "demo" (`jobtui demo` as shipped: the live figure, issue 26 item 13)."""
    if bench.quick:
        return [(80, 24, "idle", 1, 4), (120, 40, "idle", 1, 4), (80, 24, "demo", 1, 5)]
    return [(80, 24, "idle", 2, 10), (120, 40, "idle", 2, 10), (80, 24, "demo", 5, 20)]


def figure(r: TabBytes, mode: str, windows: int, window: float, command: str = "") -> Figure:
    """A tab's windows as a results figure (the performance page's row for its mode and size)."""
    limit = {"idle": IDLE_TARGET, "live": LIVE_TARGET}.get(mode, DEMO_TARGET)
    what = {"idle": "idle", "live": "live (a trickle)"}.get(mode, "live under `jobtui demo`")
    return Figure(
        "console_tmux",
        f"console {what} output via tmux {r.size}: {r.tab}",
        "B/s",
        r.rates,
        target=f"≤ {limit:,.0f} B/s".replace(",", " "),
        check=at_most(limit),
        digits=0,
        note=f"{windows}×{window:g} s" + (f"; {command}" if command else ""),
        metric=f"console_tmux:{mode}:{r.size}:{r.tab}",
    )


def run(bench: Bench) -> list[Figure]:
    from benchmarks import bigdata

    figures = []
    with bench.fresh_db("console_tmux", template=bigdata.template(bench)) as dsn:
        for cols, rows, mode, windows, window in plan(bench):
            got = measure(
                dsn,
                cols,
                rows,
                startup=bench.scale(15, 15) if mode == "demo" else bench.scale(10, 6),
                settle=bench.scale(4, 3),
                window=window,
                windows=windows,
                demo=mode == "demo",
            )
            print_results(got)
            figures += [figure(r, mode, windows, window) for r in got]
    return figures


def record(
    path: Path, results: list[TabBytes], windows: int, window: float, argv: list[str]
) -> None:
    """Put this run's `jobtui demo` figures into a results JSON (benchmarks/results.json, which
    benchmarks/table.py turns into docs/performance.md) in place of the live ones there, so
    the page's live row is this measurement, with its command and date."""
    from datetime import UTC, datetime

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ScenarioSkipped(f"--record: cannot read {path}: {exc}") from None
    command = "python benchmarks/console_tmux.py " + " ".join(shlex.quote(a) for a in argv)
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    fresh = []
    for r in results:
        if not r.live:
            continue
        fig = figure(r, "demo", windows, window, f"`{command}`, {when}").to_dict()
        # Every window within the target, not only the median.
        fig["met"] = bool(r.rates) and max(r.rates) <= DEMO_TARGET
        fresh.append(fig)
    kept = [
        f
        for f in data.get("figures", [])
        if not str(f.get("metric", "")).startswith(("console_tmux:live:", "console_tmux:demo:"))
    ]
    data["figures"] = kept + fresh
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")  # as run.py writes it
    print(f"recorded {len(fresh)} figures in {path}")


# ---------------------------------------------------------------------------------------------
# Keys of the kind screen, timed as a person sees them


@dataclass
class KeyTimes:
    """Milliseconds from a key to what the pane shows: `first` the first sign of the key
    (the new screen's frame, a "loading" mark), `done` the key's data on screen."""

    label: str
    first: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)


def _wait_screen(
    console: TmuxConsole, cond: Any, t0: float, timeout: float = 15.0
) -> tuple[float, list[str]]:
    """Poll the pane (capture-pane, every few ms) until `cond(lines)`: ms since `t0`."""
    while True:
        lines = console.screen()
        now = time.monotonic()
        if cond(lines):
            return (now - t0) * 1000, lines
        if now - t0 > timeout:
            raise ScenarioSkipped(f"timed out waiting: {' | '.join(lines)[:600]}")
        time.sleep(0.005)


def _has(*words: str) -> Any:
    return lambda lines: any(all(w in line for w in words) for line in lines)


def _kind_screen(lines: list[str]) -> bool:
    """The kind screen is up: its head (the first lines) names a kind or says loading."""
    return any(x.strip().startswith(("kind ", "loading")) for x in lines[:3])


def _loaded(flt: str, kind: str, lines: int) -> Any:
    """The filter line names `flt`, says no "loading", and `lines` lines name `kind`."""

    def cond(ls: list[str]) -> bool:
        return (
            _has("filter", flt)(ls)
            and not _has("loading")(ls)
            and sum(kind in x for x in ls) >= lines
        )

    return cond


def kind_keys(
    dsn: str, cols: int, rows: int, rounds: int, workdir: Path, refresh: float = 2.0
) -> list[KeyTimes]:
    """Enter on the Overview's first kind, then `t` (day), `t` (hour), `j` (its jobs) and,
    Enter again, `d` (its dead letters), each timed from the key to the first sign on screen
    and to its data there; through tmux, as the issue measured."""
    enter = KeyTimes("Enter on a kind")
    day = KeyTimes("t: last day")
    hour = KeyTimes("t: last hour")
    jobs = KeyTimes("j: its jobs (Jobs tab)")
    dead = KeyTimes("d: its dead letters")
    back = KeyTimes("esc: back to Overview")
    console = TmuxConsole(dsn, cols, rows, workdir, refresh)
    try:
        t0 = time.monotonic()
        _wait_screen(console, _has("kind", "ready", "status"), t0, 60)
        time.sleep(3)

        def open_kind() -> str:
            t = time.monotonic()
            console.send("Enter")
            first, _ = _wait_screen(console, _kind_screen, t)
            done, lines = _wait_screen(console, _has("now ", "unfinished:"), t)
            enter.first.append(first)
            enter.done.append(done)
            head = next(x for x in lines if x.strip().startswith("kind "))
            return head.split()[1]

        for _ in range(rounds):
            console.send("1")
            time.sleep(1.5)
            kind = open_kind()
            time.sleep(1.0)
            for times, word in ((day, "last day"), (hour, "last hour")):
                t = time.monotonic()
                console.send("t")
                times.first.append(_wait_screen(console, _has(word), t)[0])
                times.done.append(
                    _wait_screen(console, lambda ls: not _has("loading")(ls[:3]), t)[0]
                )
                time.sleep(0.5)
            t = time.monotonic()
            console.send("j")
            jobs.first.append(_wait_screen(console, _has("filter", f"kind:{kind}"), t)[0])
            jobs.done.append(_wait_screen(console, _loaded(f"kind:{kind}", kind, 3), t)[0])
            console.send("1")
            time.sleep(1.5)
            open_kind()
            time.sleep(1.0)
            t = time.monotonic()
            console.send("d")
            dead.first.append(_wait_screen(console, _has("filter", kind), t)[0])
            dead.done.append(_wait_screen(console, _loaded(kind, kind, 4), t)[0])
            console.send("1")
            time.sleep(1.5)
            open_kind()
            time.sleep(1.0)
            t = time.monotonic()
            console.send("Escape")
            back.first.append(_wait_screen(console, _has("kind", "ready", "status"), t)[0])
            back.done.append(back.first[-1])
    finally:
        console.close()
    return [enter, day, hour, jobs, dead, back]


def print_key_times(results: list[KeyTimes]) -> None:
    print(
        f"\n  {'key → on screen (ms)':28} {'first p50':>9} {'max':>5}"
        f" {'data p50':>8} {'max':>5}  each (first/data)"
    )
    for r in results:
        each = " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(r.first, r.done, strict=True))
        print(
            f"  {r.label:28} {statistics.median(r.first):9.0f} {max(r.first):5.0f}"
            f" {statistics.median(r.done):8.0f} {max(r.done):5.0f}  {each}"
        )


# ---------------------------------------------------------------------------------------------
# Stand-alone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks/console_tmux.py",
        description="idle console bytes per tab through a real terminal (tmux pipe-pane)",
    )
    parser.add_argument("--dsn", help="an existing jobtui database (else a fresh benchmark one)")
    parser.add_argument("--data", choices=["quick", "full"], default="quick")
    parser.add_argument("--sizes", default="80x24,120x40", help="COLSxROWS[,COLSxROWS]")
    parser.add_argument("--tabs", default="123456", help="tab keys in order (default 123456)")
    parser.add_argument("--startup", type=float, default=10.0, help="seconds waited out first")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds after a tab key")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--windows", type=int, default=3, help="windows per tab")
    parser.add_argument("--live", action="store_true", help="a worker and a trickle of jobs")
    parser.add_argument("--rate", type=float, default=2.0, help="--live: jobs per second")
    parser.add_argument(
        "--demo", action="store_true", help="measure `jobtui demo` as shipped (live)"
    )
    parser.add_argument(
        "--idle-and-demo", action="store_true", help="both: the idle data set, then the demo"
    )
    parser.add_argument("--short", action="store_true", help="80x24, 6 s start-up, 1×5 s")
    parser.add_argument("--rows", action="store_true", help="also bytes by screen row")
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="RESULTS",
        help="--demo: put the figures into this results JSON (benchmarks/results.json) for "
        "benchmarks/table.py",
    )
    parser.add_argument(
        "--kind-keys",
        type=int,
        metavar="ROUNDS",
        help="time the kind screen's keys (Enter on a kind, t, j, d, esc) instead (needs --dsn)",
    )
    args = parser.parse_args(argv)
    if args.short:
        args.sizes, args.startup, args.settle, args.window, args.windows = "80x24", 6, 3, 5, 1
    try:
        sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]
        if any(len(s) != 2 or min(s) < 10 for s in sizes):
            raise ValueError
    except ValueError:
        parser.error(f"--sizes: expected COLSxROWS[,COLSxROWS], got {args.sizes!r}")
    if args.windows < 1 or args.window <= 0 or args.rate <= 0:
        parser.error("--windows, --window and --rate must be positive")
    if any(k not in TABS for k in args.tabs):
        parser.error(f"--tabs: keys from {''.join(TABS)}")
    if args.kind_keys:
        if not args.dsn:
            parser.error("--kind-keys needs --dsn (a database such as benchmarks/bigdata.py's)")
        cols, rows = sizes[0]
        print(f"kind screen keys via tmux at {cols}x{rows}, {args.kind_keys} rounds", flush=True)
        work = Path(tempfile.mkdtemp(prefix="jobtui-tmux-"))
        try:
            print_key_times(kind_keys(args.dsn, cols, rows, args.kind_keys, work))
        except ScenarioSkipped as exc:
            print(f"console_tmux: {exc}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    with contextlib.ExitStack() as stack:
        only_demo = args.demo and not args.idle_and_demo
        dsn = (
            "" if only_demo else args.dsn or stack.enter_context(benchmark_db(args.data == "quick"))
        )
        live = f", live: a worker and {args.rate:g} jobs/s" if args.live else ""
        if args.demo or args.idle_and_demo:
            live += ", live: `jobtui demo` as shipped"
            args.startup = max(args.startup, 15.0)  # the demo starts its own server first
        print(
            f"console via tmux {shutil.which('tmux')} ({tmux_version()}), refresh 2 s, "
            f"start-up {args.startup:g} s, settle {args.settle:g} s after each tab key, "
            f"{args.windows}×{args.window:g} s per tab{live}",
            flush=True,
        )
        results: list[TabBytes] = []
        try:
            modes = [False, True] if args.idle_and_demo else [args.demo]
            for cols, rows in sizes:
                for demo in modes:
                    got = measure(
                        dsn,
                        cols,
                        rows,
                        tabs=args.tabs,
                        startup=args.startup,
                        settle=args.settle,
                        window=args.window,
                        windows=args.windows,
                        live=args.live and not demo,
                        per_second=args.rate,
                        by_row=args.rows,
                        demo=demo,
                    )
                    print_results(got)
                    results += got
        except ScenarioSkipped as exc:
            print(f"console_tmux: {exc}", file=sys.stderr)
            return 1
    print_table(results)
    if args.record is not None:
        try:
            record(
                args.record,
                results,
                args.windows,
                args.window,
                sys.argv[1:] if argv is None else argv,
            )
        except ScenarioSkipped as exc:
            print(f"console_tmux: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps({"results": [r.to_dict() for r in results]}))
    return 0


def tmux_version() -> str:
    done = subprocess.run(["tmux", "-V"], capture_output=True, text=True)
    return done.stdout.strip() or "?"


@contextlib.contextmanager
def benchmark_db(quick: bool) -> Iterator[str]:
    """A fresh copy of the benchmark data set on JOBTUI_BENCH_DSN or an embedded server."""
    from benchmarks import bigdata
    from benchmarks.run import start_server

    bench = Bench(admin_dsn="", quick=quick, runs=None, origin="")
    dsn, origin, server = start_server(bench.tmp)
    bench.admin_dsn, bench.origin = dsn, origin
    try:
        with bench.fresh_db("console_tmux", template=bigdata.template(bench)) as db:
            yield db
    finally:
        bench.cleanup()
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
        shutil.rmtree(bench.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
