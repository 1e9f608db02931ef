"""Start one worker on tests/apps/basic.py's handlers: `run_worker.py DSN SETTINGS_JSON`.

The console script may not exist yet, so tests start workers with this file. An "app" key in
the settings names another module of this directory (e.g. "limited", "ticking").
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys

import basic  # the script's own directory is on sys.path

from jobtui.worker import WorkerSettings, run_worker

if __name__ == "__main__":
    dsn, options = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    os.environ["JOBTUI_TEST_LEDGER_DSN"] = dsn
    if "kinds" in options:
        options["kinds"] = tuple(options["kinds"])
    app = importlib.import_module(options.pop("app")) if "app" in options else basic
    logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(run_worker(dsn, "public", app.registry, WorkerSettings(**options)))
