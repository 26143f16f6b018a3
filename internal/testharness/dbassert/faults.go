package dbassert

import (
	"fmt"
	"testing"
)

// InjectContentConflicts makes the first failures writes of raw MIME fail
// as serialization failures (SQLSTATE 40001), as a concurrent transaction
// makes a write fail. A sequence counts them, which a rolled-back
// transaction does not undo.
func InjectContentConflicts(tb testing.TB, q Querier, failures int) {
	tb.Helper()
	exec(tb, q, "inject conflicts into the writes of raw MIME", fmt.Sprintf(`
		CREATE SEQUENCE injected_conflicts;
		CREATE FUNCTION inject_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('injected_conflicts') <= %d THEN
				RAISE EXCEPTION 'injected' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER inject_conflict BEFORE INSERT ON email_message_contents
			FOR EACH ROW EXECUTE FUNCTION inject_conflict();`, failures))
}
