"""Drive `jobtui serve` from a real browser: Debian's headless Chromium through chromedriver
(selenium). Shared by tests/test_serve_browser.py and tools/browser_screenshot.py.

The console is drawn by xterm.js on a canvas, so its text is not in the page's DOM. Before the
page's scripts run, `HOOK` catches the xterm `Terminal` that textual-serve's script creates
(its `terminal` property is set once); `screen_text` then reads the rows xterm has drawn, as
the browser shows them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HOOK = r"""
window.__jobtuiTerminals = [];
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal",
      {value: value, writable: true, configurable: true, enumerable: true});
    window.__jobtuiTerminals.push(value);
  },
});
"""

SCREEN = r"""
const t = (window.__jobtuiTerminals || [])[0];
if (!t) return null;
const b = t.buffer.active, lines = [];
for (let i = 0; i < t.rows; i++) {
  const line = b.getLine(b.viewportY + i);
  lines.push(line ? line.translateToString(true) : "");
}
return lines.join("\n");
"""

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> tuple[str, str] | str:
    """(chromium, chromedriver) paths, or why they cannot be used."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make install: the dev extra has it)"
    chromium = os.environ.get("JOBTUI_CHROMIUM") or next(
        (p for p in map(shutil.which, CHROMIUM) if p), None
    )
    driver = os.environ.get("JOBTUI_CHROMEDRIVER") or shutil.which("chromedriver")
    if chromium is None or not os.access(chromium, os.X_OK):
        return f"no Chromium at {chromium or 'PATH'} (apt-get install chromium; .ci/run does)"
    if driver is None or not os.access(driver, os.X_OK):
        return f"no chromedriver at {driver or 'PATH'} (apt-get install chromium-driver)"
    return chromium, driver


@contextmanager
def chromium(width: int = 1280, height: int = 800) -> Iterator[Any]:
    """A headless Chromium, its page hooked (see `HOOK`); quit afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if isinstance(found, str):
        raise RuntimeError(found)
    binary, driver_path = found
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
        yield driver
    finally:
        driver.quit()


def screen_text(driver: Any) -> str:
    """The console's rows as the browser's terminal shows them ("" before it exists)."""
    return str(driver.execute_script(SCREEN) or "")


def wait_screen(driver: Any, ok: Callable[[str], bool], what: str, timeout: float = 30) -> str:
    """Wait until `ok(screen text)`; the text, or AssertionError with the last screen."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen_text(driver)
        if ok(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout:.0f}s for {what}; the browser shows:\n{text}")


def press(driver: Any, keys: str) -> None:
    """Type `keys` into the terminal, as a user at the keyboard would."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(keys)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(dsn: str, *options: str, port: int | None = None) -> Iterator[str]:
    """`jobtui serve` on `dsn` with `options` on a free port; its base URL while it runs."""
    port = port or free_port()
    # The DSN in the environment, as a careful operator would: a command line is public.
    argv: Sequence[str] = [sys.executable, "-m", "jobtui", "serve", "--port", str(port), *options]
    env = {**os.environ, "JOBTUI_DSN": dsn}
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"jobtui-serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jobtui serve exited: {log.read_text(errors='replace')}")
            try:
                urllib.request.urlopen(url + "/static/css/xterm.css", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise RuntimeError("jobtui serve did not answer within 30 s") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.unlink(missing_ok=True)
