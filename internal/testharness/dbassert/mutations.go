package dbassert

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// BackdatePlacement moves the time mutation id's placement was issued to
// ago before now, as if it had waited that long for an answer.
func BackdatePlacement(tb testing.TB, q Querier, id uuid.UUID, ago time.Duration) {
	tb.Helper()
	exec(tb, q, "backdate a mutation's placement",
		`UPDATE mailbox_mutations SET placement_issued_at = now() - $2::interval WHERE id = $1`, id, ago)
}
