"""The bundled worker: claim in batches, run handlers, record outcomes in batches, keep watch.

Delivery is at-least-once. What the worker guarantees, and which part keeps it:

- no two attempts of a job run at once while their workers heartbeat — liveness.py (own
  connection and task, the owner's own timeout in its `workers` row) and every outcome write
  re-checking the attempt it ends (statements.py, jobtui/sql/worker.sql); a worker that
  cannot heartbeat fences itself (liveness.py: no claims once its heartbeat is overdue, its
  handlers stopped as lost past its timeout), and a late claim is checked again before its
  handlers start (dispatcher.py); rescuers lock the owner's `workers` row before judging it;
- a job never starts after its cancel committed — the claim skips cancel requests and every
  path back to ready (retry, release, rescue) ends such a job cancelled instead (worker.sql);
  the listener delivers the cancel to a running handler at once, and without a LISTEN that
  works liveness looks for cancels every 0.5 s while jobs run;
- a job never runs more than its effective `max_attempts` counted attempts — one rule for
  every decision, the SQL function jobtui_max_attempts (migration 0023: the kind's handler
  declaration of the last worker started, else the row's), used by the claim, the rescue,
  the sweep, `why` and the console (outcomes.py says what happens when a job fails, in one
  place); a release at shutdown gives its attempt back, so a handler can start more often;
- a frozen worker stops nobody — no worker transaction holds a lock across a round trip to
  the worker: the claims (the limited one included) and a schedule's ticks are one statement
  each, a claim's reply carries at most 64 KiB of payload, and worker sessions carry
  server-side keepalives, tcp_user_timeout and idle_in_transaction_session_timeout
  (link.py), so a frozen worker's session ends within its heartbeat timeout;
- a plain handler's thread that overran its timeout keeps its job's row locked until it
  ends (dispatcher.py's `lingering`), so it counts toward its kind's limits and the job never
  runs twice at once; the engine's own threads (decoding large claims) are its own
  (statements.py), never the loop's default executor that `asyncio.to_thread` fills;
- nothing is lost — the flusher writes each outcome group on its own and sets aside only the
  row the database refuses; the supervisor releases what it holds when it stops; the
  housekeeper rescues the jobs of lost workers.

Parts: supervisor.py (start, stop, drain), dispatcher.py (slots, claims, running jobs),
running.py (one handler, its timeout and thread), flusher.py (outcomes, statistics),
liveness.py (heartbeat, cancellations, lost jobs), listener.py (NOTIFY), housekeeper.py
(rescue, sweeps, pruning, ANALYZE, samples), statements.py (the SQL with its parameters),
link.py (connections), outcomes.py, stats.py, context.py, settings.py.
"""

from jobtui.worker.context import JobCancelled, JobContext, current_job
from jobtui.worker.settings import WorkerSettings
from jobtui.worker.supervisor import Worker, run_worker

__all__ = [
    "JobCancelled",
    "JobContext",
    "Worker",
    "WorkerSettings",
    "current_job",
    "run_worker",
]
