-- Issue 15 item 8: one operator action is one audit row. A bulk action works in batches, one
-- transaction each; its first batch that changes something inserts the row and every later
-- batch adds its count to it, so the row always equals what is committed, even when the
-- action is interrupted. Roles that may write audit rows may therefore raise `count` (roles.sql
-- grants UPDATE (count) only); this guard keeps that from rewriting history: a count only
-- grows, and only on a row written by the same database role.
CREATE OR REPLACE FUNCTION __schema__.jobtui_audit_count_guard() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.count < OLD.count OR OLD.db_role IS DISTINCT FROM current_user
     OR NEW.db_role IS DISTINCT FROM OLD.db_role OR NEW.action IS DISTINCT FROM OLD.action
     OR NEW.filter IS DISTINCT FROM OLD.filter OR NEW.ids IS DISTINCT FROM OLD.ids
     OR NEW.at IS DISTINCT FROM OLD.at OR NEW.os_user IS DISTINCT FROM OLD.os_user THEN
    RAISE EXCEPTION 'audit_log rows are append-only: only the role that wrote a row may add to its count'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS jobtui_audit_count_guard ON __schema__.audit_log;
CREATE TRIGGER jobtui_audit_count_guard BEFORE UPDATE ON __schema__.audit_log
  FOR EACH ROW EXECUTE FUNCTION __schema__.jobtui_audit_count_guard();
