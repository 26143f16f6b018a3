package mutation

import (
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// View is a mutation as the command line and the HTTP API show it. It
// holds no mail: ids, aliases, words and a failure code.
type View struct {
	ID               string `json:"id"`
	Account          string `json:"account"`
	EmailID          string `json:"email_id"`
	Kind             string `json:"kind"`
	SourceAlias      string `json:"source_alias"`
	DestinationAlias string `json:"destination_alias,omitempty"`
	RequestID        string `json:"request_id,omitempty"`
	State            string `json:"state"`
	// Placement is where a move or copy stands with the destination's
	// discovery: "named" (the server's COPYUID named the placement, not
	// discovered yet), "joined" (discovered and joined to the record) or
	// "unjoined" (the server carried it without naming the placement, so
	// no discovery is joined to it: the destination's copy is stored as
	// any other discovery, and a move's source is tombstoned once it is
	// seen to leave). Empty for the other changes, and before the
	// placement is known to have run.
	Placement string `json:"placement,omitempty" jsonschema:"a move or copy only: named (the server named where it placed the message), joined (that placement was found), unjoined (the server did not name it)"`
	// Summary is State, followed by ", unjoined" for an unjoined
	// placement: "completed, unjoined".
	Summary     string     `json:"summary" jsonschema:"the state, followed by \", unjoined\" for an unjoined move or copy"`
	Stage       string     `json:"stage"`
	Attempts    int        `json:"attempts"`
	FailureCode string     `json:"failure_code,omitempty"`
	RecordedAt  time.Time  `json:"recorded_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

// States maps the words a caller filters with to the states.
var States = map[string]mailstore.MutationState{
	"pending":       mailstore.MutationPending,
	"converging":    mailstore.MutationConverging,
	"completed":     mailstore.MutationCompleted,
	"dead-lettered": mailstore.MutationDeadLettered,
}

// StateWord returns the word a caller filters s with.
func StateWord(s mailstore.MutationState) string {
	for w, st := range States {
		if st == s {
			return w
		}
	}
	return strings.ToLower(string(s))
}

// ViewOf returns the view of m.
func ViewOf(m mailstore.Mutation) View {
	v := View{
		ID: m.ID.String(), Account: m.AccountKey, EmailID: m.EmailID.String(), Kind: KindWord(m.Kind),
		SourceAlias: m.SourceAlias, DestinationAlias: m.DestinationAlias, RequestID: m.RequestID,
		State: StateWord(m.State), Stage: string(m.Stage), Attempts: m.Attempts, FailureCode: m.FailureCode,
		RecordedAt: m.RecordedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(),
	}
	v.Placement = PlacementWord(m)
	v.Summary = v.State
	if v.Placement == PlacementUnjoined {
		v.Summary += ", " + PlacementUnjoined
	}
	if !m.CompletedAt.IsZero() {
		t := m.CompletedAt.UTC()
		v.CompletedAt = &t
	}
	return v
}

// The words of View.Placement.
const (
	PlacementNamed    = "named"
	PlacementJoined   = "joined"
	PlacementUnjoined = "unjoined"
)

// PlacementWord returns the word View.Placement shows for m.
func PlacementWord(m mailstore.Mutation) string {
	switch {
	case !m.Kind.Places():
		return ""
	case !m.PlacementObservedAt.IsZero():
		return PlacementJoined
	case m.PlacedUID != 0:
		return PlacementNamed
	case m.Unjoined():
		return PlacementUnjoined
	}
	return ""
}
