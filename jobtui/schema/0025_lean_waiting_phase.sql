-- Issue 24, "a lean hot path": the waiting phase carries only the indexes the claim needs.
--
-- Every waiting row (finished_at IS NULL AND locked_at IS NULL) entered seven indexes at its
-- INSERT. Two of them served nobody's claim: jobs_waiting_id (id) and jobs_waiting_kind_id
-- (kind, id) held the waiting rows in id order for the console's keyset pages. The console now
-- reads waiting rows in claim order (priority DESC, run_at, id: what runs next comes first,
-- jobtui/sql/browse.sql browse_jobs_page), through jobs_claim for all kinds and jobs_claim_kind
-- for one, which the claim keeps anyway; so a waiting row enters five indexes: jobs_pkey,
-- jobs_claim, jobs_claim_kind (the claims), jobs_pending (the article's claim, the oldest ready
-- row) and jobs_pending_kind (per-kind oldest ready row, counts, the limited kinds' claim).
--
-- Not folded: jobs_claim_kind (kind, priority DESC, run_at, id) and jobs_pending_kind (kind,
-- run_at) INCLUDE (attempts, max_attempts) into one index. The readers of jobs_pending_kind want
-- a kind's rows in run_at order (the per-kind oldest ready row, one probe each; the limited
-- kinds' claim): in claim order they would read a kind's whole range.
--
-- DROP INDEX takes ACCESS EXCLUSIVE on jobs for a moment; `jobtui migrate` bounds the wait
-- (LockWait) and tries again after a back-off.
DROP INDEX __schema__.jobs_waiting_id;
DROP INDEX __schema__.jobs_waiting_kind_id;
