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
  the listener delivers the cancel to a running handler at once;
- a job never runs more than its effective `max_attempts` counted attempts — one rule, written
  into the row by the claim and read from the row by every later decision, the sweep included
  (outcomes.py says what happens when a job fails, in one place); a release at shutdown gives
  its attempt back, so a handler can start more often than that;
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
