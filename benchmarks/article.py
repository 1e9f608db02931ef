"""The article's `jobs` table (shared/seed/), for the tests that check a producer written
against the article keeps working and for benchmarks/floor.py's bare baseline."""

# Copied verbatim from the article in shared/seed/.
ARTICLE_DDL = """
create table jobs (
  id           bigserial primary key,
  kind         text not null,
  payload      jsonb not null,
  run_at       timestamptz not null default now(),
  attempts     int not null default 0,
  max_attempts int not null default 5,
  locked_at    timestamptz,
  finished_at  timestamptz,
  last_error   text
);

create index jobs_pending on jobs (run_at)
  where finished_at is null;
"""

# Its consumer's claim, verbatim.
ARTICLE_CLAIM = """
update jobs set locked_at = now(), attempts = attempts + 1
where id = (
  select id from jobs
  where finished_at is null and locked_at is null and run_at <= now()
  order by run_at
  limit 1
  for update skip locked
)
returning *;
"""
