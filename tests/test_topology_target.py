"""Issue 15 item 4: the console's header names the database of the live connection.

With the target given by libpq's environment (`PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`) and
no DSN, the header is built from the (empty) DSN string today and reads `postgres@local`.
"""

from __future__ import annotations

import psycopg
import pytest
from topology import console_polled


async def test_header_shows_user_host_port_database_of_the_live_connection(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.widgets.status import StatusBar

    with psycopg.connect(dsn) as conn:
        info = conn.info
        user, host, port, db = info.user, info.host, info.port, info.dbname
    for var in ("JOBTUI_DSN", "DATABASE_URL", "PGSERVICE", "PGPASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PGHOST", host)
    monkeypatch.setenv("PGPORT", str(port))
    monkeypatch.setenv("PGDATABASE", db)
    monkeypatch.setenv("PGUSER", user)
    app = JobtuiApp("", "public", config=ConsoleConfig(refresh_s=0.2))
    async with app.run_test(size=(160, 40)) as pilot:
        await console_polled(app, pilot)
        assert app.polls >= 2 and app.db_error is None, app.db_error
        header = app.query_one(StatusBar).plain
    shown_host = host if not host.startswith("/") else ""
    assert f"{user}@{shown_host}" in header and f":{port}/{db}" in header, header
