-- Per-kind concurrency and rate limits (issue 13), enforced at claim time (jobtui.limits).
-- Declared values come from the handlers (upserted by workers at start); an operator override
-- replaces the declared set as a whole until it is cleared. The effective values are
-- generated columns so that every reader (claim, console, CLI) applies the same rule.
CREATE TABLE IF NOT EXISTS __schema__.kind_limits (
  kind                  text primary key,
  declared_concurrency  int check (declared_concurrency >= 1),
  declared_per_worker   int check (declared_per_worker >= 1),
  declared_rate         int check (declared_rate >= 1),
  declared_period_s     int not null default 1 check (declared_period_s IN (1, 60)),
  declared_at           timestamptz,
  overridden            boolean not null default false,
  override_concurrency  int check (override_concurrency >= 1),
  override_per_worker   int check (override_per_worker >= 1),
  override_rate         int check (override_rate >= 1),
  override_period_s     int not null default 1 check (override_period_s IN (1, 60)),
  overridden_by         text,
  overridden_at         timestamptz,
  concurrency int generated always as (
    CASE WHEN overridden THEN override_concurrency ELSE declared_concurrency END) stored,
  per_worker int generated always as (
    CASE WHEN overridden THEN override_per_worker ELSE declared_per_worker END) stored,
  rate int generated always as (
    CASE WHEN overridden THEN override_rate ELSE declared_rate END) stored,
  period_s int generated always as (
    CASE WHEN overridden THEN override_period_s ELSE declared_period_s END) stored,
  limited boolean generated always as (
    CASE WHEN overridden
         THEN override_concurrency IS NOT NULL OR override_per_worker IS NOT NULL
              OR override_rate IS NOT NULL
         ELSE declared_concurrency IS NOT NULL OR declared_per_worker IS NOT NULL
              OR declared_rate IS NOT NULL END) stored,
  -- Token bucket for the rate: `tokens` as of `tokens_at`, refilled at rate/period_s per
  -- second up to `rate`. 1970 means "full".
  tokens                double precision not null default 0,
  tokens_at             timestamptz not null default 'epoch'
);
