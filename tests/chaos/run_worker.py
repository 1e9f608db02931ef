"""Start one jobtui worker on the chaos handlers with short heartbeat settings."""

from __future__ import annotations

import asyncio
import os
import sys

import chaos_app

from jobtui.worker import WorkerSettings, run_worker

if __name__ == "__main__":
    settings = WorkerSettings(
        concurrency=int(os.environ.get("CHAOS_CONCURRENCY", "10")),
        poll_interval=0.2,
        heartbeat_interval=0.5,
        heartbeat_timeout=2.0,
        shutdown_grace=5.0,
    )
    asyncio.run(run_worker(sys.argv[1], "public", chaos_app.registry, settings))
