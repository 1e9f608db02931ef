"""`jobtui serve` in a real browser (issue 28): Debian's headless Chromium drives the console
served over HTTP, on a real database.

Where Chromium, chromedriver or selenium are missing the browser tests skip and say why
(.ci/run installs chromium and chromium-driver as root). The gate's HTTP checks need no
browser.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo

from jobtui.enqueue import enqueue
from tools.browser import chromium, find_browser, press, serving, wait_screen

pytest.importorskip("textual_serve", reason="textual-serve is not installed (jobtui[web])")

ALICE = "alice:a1ice-secret-0123456789"
BOB = "bob:b0b-secret-9876543210xyz"
KIND = "send_invoice"
DEPTH = 7

found = find_browser()
needs_browser = pytest.mark.skipif(isinstance(found, str), reason=str(found))


def secret(token: str) -> str:
    return token.split(":", 1)[1]


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# web users\n{ALICE}\n{BOB}\n")
    return path


@pytest.fixture
def queue(dsn: str) -> str:
    """A database with DEPTH ready jobs of KIND."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for n in range(DEPTH):
            enqueue(conn, KIND, {"n": n})
    return dsn


@pytest.fixture
def browser() -> Iterator[object]:
    with chromium() as driver:
        yield driver


def overview_ready(text: str) -> bool:
    """The Overview is drawn with its kinds table, KIND's row showing its depth."""
    return "1 Overview" in text and re.search(rf"{KIND}\s+{DEPTH}\b", text) is not None


def open_console(driver: object, url: str, token: str) -> str:
    driver.get(f"{url}/?token={secret(token)}")  # type: ignore[attr-defined]
    return wait_screen(driver, overview_ready, f"the Overview with {KIND} at depth {DEPTH}")


def audit_and_pauses(dsn: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    with psycopg.connect(dsn) as conn:
        audit = conn.execute("SELECT os_user, action FROM audit_log ORDER BY id").fetchall()
        paused = conn.execute("SELECT kind, paused_by FROM paused_kinds").fetchall()
    return audit, paused


@needs_browser
def test_the_browser_shows_the_overview_and_switches_tabs(
    queue: str, tokens: Path, browser: object
) -> None:
    with serving(queue, "--token-file", str(tokens)) as url:
        text = open_console(browser, url, ALICE)
        # the sign-in answered with a redirect: the secret is no longer in the address bar
        assert secret(ALICE) not in browser.current_url  # type: ignore[attr-defined]
        assert "READ-ONLY" in text
        assert re.search(rf"^ *{KIND} +{DEPTH} ", text, re.M), text
        press(browser, "3")
        wait_screen(browser, lambda t: "all dead letters" in t, "the Dead letters tab")
        press(browser, "2")
        wait_screen(browser, lambda t: "filter unfinished jobs" in t, "the Jobs tab", 20)


@needs_browser
def test_a_wrong_or_missing_token_gets_no_console(
    queue: str, tokens: Path, browser: object
) -> None:
    from selenium.webdriver.common.by import By

    with serving(queue, "--token-file", str(tokens)) as url:
        for address, says in (
            (f"{url}/", "needs a token"),
            (f"{url}/?token=not-the-right-secret-at-all", "not valid"),
        ):
            browser.get(address)  # type: ignore[attr-defined]
            body = browser.find_element(By.TAG_NAME, "body").text  # type: ignore[attr-defined]
            assert says in body
            assert not browser.find_elements(By.CSS_SELECTOR, "#terminal")  # type: ignore[attr-defined]
            assert browser.execute_script("return window.__jobtuiTerminals.length") == 0  # type: ignore[attr-defined]


def upgrade(url: str, headers: dict[str, str]) -> int:
    """The status of a websocket upgrade request to `url`/ws."""
    host = url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=10)
    try:
        conn.request(
            "GET",
            "/ws",
            headers={
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                **headers,
            },
        )
        return conn.getresponse().status
    finally:
        conn.close()


def test_the_gate_refuses_pages_and_websockets_without_a_token(queue: str, tokens: Path) -> None:
    with serving(queue, "--host", "0.0.0.0", "--token-file", str(tokens)) as url:
        for address in (f"{url}/", f"{url}/?token=wrong-wrong-wrong-wrong"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(address, timeout=10)
            assert refused.value.code == 401
        assert upgrade(url, {}) == 401
        assert upgrade(url, {"Authorization": "Bearer wrong-wrong-wrong-wrong"}) == 401
        good = {"Authorization": f"Bearer {secret(BOB)}"}
        # another site's page cannot open the console with the operator's credentials
        assert upgrade(url, {**good, "Origin": "http://evil.example"}) == 403
        assert upgrade(url, {**good, "Origin": url}) == 101


def page(url: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    """GET `url`/ with `headers` (Host among them, when given); the response, body read."""
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
    try:
        conn.request("GET", "/", headers=headers)
        response = conn.getresponse()
        response.read()
        return response
    finally:
        conn.close()


def page_status(url: str, headers: dict[str, str]) -> int:
    return page(url, headers).status


def raw_status(url: str, request: bytes) -> bytes:
    """The status line the server answers `request` (raw bytes, whatever they hold) with."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        return conn.makefile("rb").readline().strip()


def test_a_token_that_is_not_utf8_is_refused_not_a_server_error(queue: str, tokens: Path) -> None:
    with serving(queue, "--token-file", str(tokens)) as url:
        for header in (b"Authorization: Bearer \xff\xfe-not-utf8", b"Cookie: jobtui_session=\xff"):
            request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n\r\n"
            assert raw_status(url, request) == b"HTTP/1.1 401 Unauthorized", header


def test_a_keystroke_that_is_not_text_does_not_end_the_session(queue: str, tokens: Path) -> None:
    """JSON can carry a lone surrogate, which UTF-8 cannot encode; the session goes on."""
    import asyncio

    import aiohttp

    async def session(url: str) -> list[object]:
        auth = {"Authorization": f"Bearer {secret(ALICE)}"}
        async with (
            aiohttp.ClientSession() as client,
            client.ws_connect(f"{url}/ws", headers=auth) as ws,
        ):
            await ws.send_str('["stdin", "\\ud800"]')
            await ws.send_str('["ping", "still-there"]')
            while True:
                message = await asyncio.wait_for(ws.receive(), 20)
                if message.type == aiohttp.WSMsgType.TEXT:
                    return list(message.json())
                if message.type != aiohttp.WSMsgType.BINARY:
                    return [message.type]

    with serving(queue, "--token-file", str(tokens)) as url:
        assert asyncio.run(session(url)) == ["pong", "still-there"]


def test_no_other_site_may_frame_the_console(queue: str) -> None:
    """Clickjacking: a page over a framed console could make the operator type into it."""
    with serving(queue) as url:
        answer = page(url, {})
        assert answer.status == 200
        assert answer.getheader("X-Frame-Options") == "DENY"
        assert "frame-ancestors 'none'" in (answer.getheader("Content-Security-Policy") or "")
        assert answer.getheader("Cache-Control") == "no-store"  # built from the Host header


def test_without_tokens_a_page_of_another_name_gets_no_console(queue: str) -> None:
    """DNS rebinding: a site whose name resolves to 127.0.0.1 is same-origin with itself, so
    its page could open the token-less console; only the Host header gives it away."""
    with serving(queue) as url:
        port = url.rsplit(":", 1)[1]
        evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        assert page_status(url, {"Host": evil["Host"]}) == 403
        assert upgrade(url, evil) == 403
        for name in ("localhost", "127.0.0.1", "[::1]"):
            here = {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"}
            assert page_status(url, {"Host": here["Host"]}) == 200
            assert upgrade(url, here) == 101


@needs_browser
def test_read_only_refuses_a_write_and_the_database_is_unchanged(
    queue: str, tokens: Path, browser: object
) -> None:
    with serving(queue, "--token-file", str(tokens)) as url:
        open_console(browser, url, ALICE)
        press(browser, "P")  # pause the kind under the cursor
        wait_screen(
            browser, lambda t: "Read-only: Pause kind is not allowed" in t, "the refusal", 10
        )
        # an export would write a file on the server: a browser session may not, even read-only
        press(browser, "3")
        wait_screen(browser, lambda t: "all dead letters" in t, "the Dead letters tab")
        press(browser, "e")
        wait_screen(browser, lambda t: "Export writes a file on the server" in t, "refusal", 10)
    assert audit_and_pauses(queue) == ([], [])


@needs_browser
def test_saving_a_copy_downloads_it_and_writes_nothing_on_the_server(
    queue: str, tokens: Path, browser: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Y` saves a payload to a file: on the server that would be a write of a read-only
    session, in a folder the web user cannot read; the browser gets it instead."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the sessions' state folder
    with serving(queue, "--token-file", str(tokens)) as url:
        open_console(browser, url, ALICE)
        press(browser, "2")
        wait_screen(browser, lambda t: re.search(rf"\b1\s+{KIND}\s+ready", t), "the Jobs tab")
        time.sleep(0.5)  # the rows are drawn; let the cursor land on the first: job 1, the
        # first to run (the Jobs tab lists waiting jobs in claim order)
        press(browser, "Y")
        wait_screen(browser, lambda t: "Download?" in t, "the choice of what to download", 10)
        press(browser, "2")  # the payload
        notice = wait_screen(browser, lambda t: "to your browser as the" in t, "the notice", 10)
        assert re.search(r"download\s+job-1-payload-\d{8}-\d{6}\.txt", notice)
    assert not state.exists() or not any(state.rglob("*.txt"))


@needs_browser
def test_with_allow_writes_a_write_is_audited_with_the_token_name(
    queue: str, tokens: Path, browser: object
) -> None:
    with serving(queue, "--token-file", str(tokens), "--allow-writes") as url:
        text = open_console(browser, url, BOB)
        assert "READ-ONLY" not in text
        press(browser, "P")
        wait_screen(browser, lambda t: "Pause kind?" in t, "the confirmation", 10)
        press(browser, "1")
        wait_screen(browser, lambda t: f"Paused kind {KIND}" in t, "the notice", 10)
    assert audit_and_pauses(queue) == ([("web:bob", "pause_kind")], [(KIND, "web:bob")])


async def test_the_database_tabs_actions_are_audited_as_the_web_user(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A browser session's console acts as web:NAME in every tab, the Database tab's signals
    too; and a confirmation answered after the console went read-only does nothing."""
    from test_dbhealth import audit_rows, churn, open_blocker
    from test_tui_console import config, notifications, until
    from test_tui_database import SMALL, blocker_text, open_database_tab

    from jobtui import ops
    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.screens.confirm import ConfirmScreen

    blocker = open_blocker(dsn)
    pid = blocker.info.backend_pid
    try:
        churn(conn, 120)
        app = JobtuiApp(dsn, "public", config=config(), actor=ops.Actor.web("carol"))
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: f"pid {pid}" in blocker_text(app))
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.read_only_why = "the database refused a write"  # while the dialog was open
            await pilot.press("1")
            await until(pilot, lambda: "Read-only: nothing was done" in str(notifications(app)))
            blocker.execute("SELECT 1")  # still there
            assert audit_rows(conn) == []
            app.read_only_why = None
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(pilot, lambda: f"terminated backend {pid}" in str(notifications(app)))
        rows = audit_rows(conn)
        assert [(r[0], r[3]) for r in rows] == [("terminate_backend", "web:carol")]
    finally:
        blocker.close()


@needs_browser
def test_each_session_gets_the_config_env_and_refresh(
    queue: str, tmp_path: Path, browser: object
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[console]\nenv = "staging-eu"\n\n[keys]\npause_kind = "Z"\n')
    with serving(queue, "--config", str(config), "--refresh", "5s") as url:  # loopback: no token
        browser.get(url + "/")  # type: ignore[attr-defined]
        text = wait_screen(browser, overview_ready, "the Overview")
        assert "ENVIRONMENT STAGING-EU" in text and "⟳ 5s" in text
        press(browser, "Z")  # the config's key for pausing a kind: refused, read-only
        wait_screen(browser, lambda t: "Read-only: Pause kind" in t, "the refusal", 10)


@needs_browser
def test_no_secret_reaches_the_browser_or_a_command_line(
    queue: str, tokens: Path, browser: object
) -> None:
    password = "pw-" + uuid.uuid4().hex  # the test server trusts: any password connects
    with serving(
        conninfo.make_conninfo(queue, password=password), "--token-file", str(tokens)
    ) as url:
        text = open_console(browser, url, ALICE)
        page = browser.page_source  # type: ignore[attr-defined]
        cookies = str(browser.get_cookies())  # type: ignore[attr-defined]
        commands = command_lines()
        ours = [env.split(b"\0") for env in consoles_environments() if password.encode() in env]
    assert any("--web-user alice" in c for c in commands), "the session's console was not seen"
    # the password reaches the session's libpq as $PGPASSWORD, never in a string of the
    # console's (whose crash report, with every frame's locals, goes to serve's output)
    assert len(ours) == 1 and f"PGPASSWORD={password}".encode() in ours[0]
    assert [v for v in ours[0] if password.encode() in v] == [f"PGPASSWORD={password}".encode()]
    for leak in (password, secret(ALICE), secret(BOB)):
        assert leak not in text and leak not in page and leak not in cookies
        assert not [c for c in commands if leak in c]


def consoles_environments() -> list[bytes]:
    """The environments of the browser sessions' consoles on this machine."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"--web-user" in (proc / "cmdline").read_bytes():
                found.append((proc / "environ").read_bytes())
        except OSError:
            continue  # it ended
    return found


def sessions_of(dsn: str) -> list[int]:
    """The pids of the browser sessions' consoles on `dsn` (from their environment)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"--web-user" not in (proc / "cmdline").read_bytes():
                continue
            if f"JOBTUI_DSN={dsn}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            continue  # it ended
    return pids


def gone(pids: list[int], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [p for p in pids if Path(f"/proc/{p}").exists()]:
            return True
        time.sleep(0.2)
    return False


@needs_browser
@pytest.mark.parametrize("stop", ["terminate", "kill"])
def test_the_sessions_end_with_the_server(
    queue: str, tokens: Path, browser: object, stop: str
) -> None:
    """A console left behind would hold a connection and refresh forever, for nobody."""
    with serving(queue, "--token-file", str(tokens)) as url:
        open_console(browser, url, ALICE)
        pids = sessions_of(queue)
        assert len(pids) == 1
        server = int(Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(server, signal.SIGTERM if stop == "terminate" else signal.SIGKILL)
        assert gone(pids), f"the session's console outlived `jobtui serve` ({stop})"


def command_lines() -> list[str]:
    """Every process's command line on this machine."""
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # it ended
    return lines


# --- the command line (no browser) ------------------------------------------------------------


def serve_fails(*argv: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "jobtui", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_binding_beyond_loopback_needs_tokens(dsn: str, tmp_path: Path) -> None:
    line = serve_fails("--dsn", dsn, "--host", "0.0.0.0", "--port", "1")
    assert "--token-file" in line and "0.0.0.0" in line
    weak = tmp_path / "weak"
    weak.write_text("carol:short\n")
    line = serve_fails("--dsn", dsn, "--host", "0.0.0.0", "--token-file", str(weak))
    assert "at least 16 characters" in line and "line 1" in line
    # behind a reverse proxy the console is reachable from elsewhere, whatever --host says
    line = serve_fails("--dsn", dsn, "--public-url", "https://jobs.example.com", "--port", "1")
    assert "--token-file" in line and "jobs.example.com" in line
    line = serve_fails("--dsn", dsn, "--token-file", str(tmp_path / "missing"))
    assert "missing" in line
    # writes name their web user: without tokens there is no one to name, even on loopback
    line = serve_fails("--dsn", dsn, "--allow-writes", "--port", "1")
    assert "--allow-writes needs tokens" in line
    env = {**os.environ, "JOBTUI_SERVE_TOKENS": "dave:0123456789abcdef, dave:fedcba9876543210"}
    line = serve_fails("--dsn", dsn, "--host", "0.0.0.0", env=env)
    assert "$JOBTUI_SERVE_TOKENS" in line and "given twice" in line
