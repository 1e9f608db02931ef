"""Start one jobtui worker on the chaos handlers.

`run_worker.py DSN [APP_MODULE [HEARTBEAT_S HEARTBEAT_TIMEOUT_S]]`: the app defaults to
chaos_app (the classic run), the heartbeat to 0.5 s / 2 s.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys

from jobtui.worker import WorkerSettings, run_worker

if __name__ == "__main__":
    app = importlib.import_module(sys.argv[2] if len(sys.argv) > 2 else "chaos_app")
    beat = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = WorkerSettings(
        concurrency=int(os.environ.get("CHAOS_CONCURRENCY", "10")),
        poll_interval=0.2,
        heartbeat_interval=beat,
        heartbeat_timeout=timeout,
        shutdown_grace=float(os.environ.get("CHAOS_GRACE", "5.0")),
        prune_interval=2.0,
        housekeeping_lock_timeout=0.5,
    )
    asyncio.run(run_worker(sys.argv[1], "public", app.registry, settings))
