package dbassert

import (
	"fmt"
	"testing"
	"time"
)

// SetRunFailures records that account's runs failed failures times in a
// row before its current run, and whether that run has failed so far.
func SetRunFailures(tb testing.TB, q Querier, account string, failures int, runFailed bool) {
	tb.Helper()
	exec(tb, q, fmt.Sprintf("set the run failures of account %q", account),
		`UPDATE account_states SET consecutive_failures = $2, run_failed = $3 WHERE account_key = $1`,
		account, failures, runFailed)
}

// BackdateRunStart moves the start of account's current (or last) run to
// ago before now.
func BackdateRunStart(tb testing.TB, q Querier, account string, ago time.Duration) {
	tb.Helper()
	exec(tb, q, fmt.Sprintf("backdate the run start of account %q", account),
		`UPDATE account_states SET run_started_at = now() - $2::interval WHERE account_key = $1`, account, ago)
}
