-- Issue 13: the fast claim of a worker that handles a kind with a limit walks each of its
-- unlimited kinds on its own, in claim order (worker_claim_per_kind). worker_claim walks
-- jobs_claim in (priority DESC, run_at, id) order and must step over every ready row of a
-- kind left out of its list that sits ahead: 100 000 such rows took a claim of 50 from
-- 3.6 ms to 27 ms (benchmarks/limits_skew.py). Partial like jobs_claim: a claimed row leaves
-- it, so claims do not write to it; an enqueue writes one more entry.
CREATE INDEX IF NOT EXISTS jobs_claim_kind ON __schema__.jobs (kind, priority DESC, run_at, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
