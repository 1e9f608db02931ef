-- Issue 15 item 7: the Overview's dead-letter count per kind must not depend on a fresh
-- visibility map. Counting 100,000 dead letters by index-only scan takes ~25 ms after a VACUUM
-- and 70-135 ms once new rows have cleared the map (heap fetches), growing with the table.
-- Instead every statement that adds or removes dead letters appends one (kind, delta) row per
-- kind here, in its own transaction, so a snapshot reads exact counts from a table of a few
-- rows. Dead letters are written only when jobs die, are requeued or deleted, never on the
-- claim/complete path, so this costs the drain nothing.
CREATE TABLE IF NOT EXISTS __schema__.dead_letter_counts (
  kind text   not null,
  n    bigint not null
);
CREATE INDEX IF NOT EXISTS dead_letter_counts_kind ON __schema__.dead_letter_counts (kind);

-- SECURITY DEFINER (the owner's rights, a fixed search_path): the worker and operator roles
-- need no grant on the counts table, and roles scripts from before this version keep working.
-- Now and then (1 firing in 20) a kind's delta rows are folded into one; the fold sums only
-- the rows its own DELETE removed (RETURNING), so two folds at once never count a row twice.
CREATE OR REPLACE FUNCTION __schema__.jobtui_dead_letter_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.dead_letter_counts;
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, count(*) FROM new_rows r GROUP BY r.kind;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, -count(*) FROM old_rows r GROUP BY r.kind;
  ELSE  -- UPDATE: only a changed kind moves a count
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT u.kind, sum(u.n) FROM (
      SELECT r.kind, 1 AS n FROM new_rows r
      UNION ALL
      SELECT r.kind, -1 FROM old_rows r
    ) u GROUP BY u.kind HAVING sum(u.n) <> 0;
  END IF;
  IF random() < 0.05 THEN
    FOR k IN SELECT DISTINCT c.kind FROM __schema__.dead_letter_counts c ORDER BY 1 LOOP
      WITH gone AS (
        DELETE FROM __schema__.dead_letter_counts c WHERE c.kind = k RETURNING c.n
      )
      INSERT INTO __schema__.dead_letter_counts (kind, n)
      SELECT k, sum(g.n) FROM gone g HAVING sum(g.n) <> 0;
    END LOOP;
  END IF;
  RETURN NULL;
END
$fn$;

-- Readable by every role that may read the snapshot, without a grant on the table.
CREATE OR REPLACE FUNCTION __schema__.jobtui_dead_letter_counts()
RETURNS TABLE (kind text, dead bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, sum(c.n)::bigint FROM __schema__.dead_letter_counts c
  GROUP BY c.kind HAVING sum(c.n) <> 0
$fn$;

DROP TRIGGER IF EXISTS jobtui_dead_count_ins ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_count_del ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_count_upd ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_count_trunc ON __schema__.dead_letters;
CREATE TRIGGER jobtui_dead_count_ins AFTER INSERT ON __schema__.dead_letters
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_del AFTER DELETE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_upd AFTER UPDATE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_trunc AFTER TRUNCATE ON __schema__.dead_letters
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();

-- The triggers hold dead_letters' lock from here to commit, so no row is missed or counted
-- twice between this count and the first trigger firing.
DELETE FROM __schema__.dead_letter_counts;
INSERT INTO __schema__.dead_letter_counts (kind, n)
SELECT d.kind, count(*) FROM __schema__.dead_letters d GROUP BY d.kind;
