"""The docs' browser screenshot (docs/img/browser.png): the live demo served by `jobtui serve`,
photographed by headless Chromium.

    .venv/bin/python tools/browser_screenshot.py [docs/img/browser.png] [--settle 25]

Starts `jobtui demo --no-console` in a fresh demo directory (embedded PostgreSQL, a worker,
live jobs), waits `--settle` seconds for its figures, serves the console with `--allow-writes`
off (read-only, as a teammate would see it), and saves what the browser shows.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.browser import chromium, find_browser, serving, wait_screen


def demo_dsn(data_dir: Path, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = subprocess.run(
            [sys.executable, "-m", "jobtui", "demo", "--print-dsn", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
        time.sleep(1)
    raise SystemExit(f"the demo did not start within {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="docs/img/browser.png")
    parser.add_argument("--settle", type=float, default=25.0, help="seconds of live demo first")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=760)
    args = parser.parse_args()
    found = find_browser()
    if isinstance(found, str):
        print(f"browser_screenshot: {found}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="jobtui-shot-") as tmp:
        data_dir = Path(tmp) / "demo"
        demo = subprocess.Popen(
            [sys.executable, "-m", "jobtui", "demo", "--no-console", "--data-dir", str(data_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            dsn = demo_dsn(data_dir)
            time.sleep(args.settle)
            with serving(dsn) as url, chromium(args.width, args.height) as driver:
                driver.get(url + "/")
                wait_screen(
                    driver,
                    lambda t: "1 Overview" in t and re.search(r"\blive\b", t) is not None,
                    "the live Overview",
                    60,
                )
                time.sleep(3)  # the charts' first samples, the toasts gone
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(args.out)
        finally:
            demo.terminate()
            demo.wait(timeout=60)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
