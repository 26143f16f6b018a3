package mutation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// Kinds maps the words a caller asks with (the command line's and the
// HTTP API's) to the mutations.
var Kinds = map[string]mailstore.MutationKind{
	"move":        mailstore.MutationRelocate,
	"copy":        mailstore.MutationCopy,
	"delete":      mailstore.MutationDelete,
	"mark-read":   mailstore.MutationMarkRead,
	"mark-unread": mailstore.MutationMarkUnread,
}

// KindWord returns the word a caller asks for k with.
func KindWord(k mailstore.MutationKind) string {
	for w, kind := range Kinds {
		if kind == k {
			return w
		}
	}
	return string(k)
}

// Request is one invocation's request for a change.
type Request struct {
	// EmailID is the stored email (the id search prints).
	EmailID uuid.UUID
	// Kind is one of the keys of Kinds.
	Kind string
	// DestinationAlias names the destination folder of a move or copy.
	DestinationAlias string
	// RequestID identifies the invocation; one is generated when empty.
	RequestID string
}

// RequestError is a request refused before anything was recorded. Reason
// is its stable name; Status the HTTP status that answers it.
type RequestError struct {
	Reason string
	Status int
	text   string
}

func (e *RequestError) Error() string { return failure.Text(e.text, e.Reason) }

// Identity implements failure.Named.
func (e *RequestError) Identity() string { return e.Reason }

func refuse(status int, reason, text string) *RequestError {
	return &RequestError{Reason: reason, Status: status, text: text}
}

// The refusals of a request.
var (
	ErrUnknownKind          = refuse(http.StatusBadRequest, "MutationKindUnknown", "the change must be move, copy, delete, mark-read or mark-unread")
	ErrEmailUnknown         = refuse(http.StatusNotFound, "EmailUnknown", "no stored email has this id")
	ErrEmailTombstoned      = refuse(http.StatusGone, "EmailNoLongerServed", "the email is no longer on the server, or no longer served")
	ErrAccountNotConfigured = refuse(http.StatusConflict, "AccountNotConfigured", "the email's account is not configured")
	ErrDestinationRequired  = refuse(http.StatusBadRequest, "DestinationRequired", "a move or copy needs a destination folder alias")
	ErrDestinationUnwanted  = refuse(http.StatusBadRequest, "DestinationNotExpected", "only a move or copy takes a destination folder alias")
	ErrAliasUnknown         = refuse(http.StatusBadRequest, "DestinationAliasUnknown", "the destination alias is not configured for the email's account")
	ErrAliasUnresolved      = refuse(http.StatusConflict, "DestinationAliasUnresolved", "the destination alias has not been resolved to a folder yet")
	ErrSameFolder           = refuse(http.StatusBadRequest, "DestinationIsSource", "the email is already in the destination folder")
	ErrRequestIDReused      = refuse(http.StatusConflict, "RequestIdReused", "the request id already names another change")
	ErrRequestIDInvalid     = refuse(http.StatusBadRequest, "RequestIdInvalid", "a request id is 1 to 200 printable characters")
)

// Record checks r, writes the change it asks for and inserts its first
// stage's job in the same transaction. It returns the change and true, or
// the change r's request id already names (the same change) and false. A
// request that is refused records nothing and is a *RequestError.
func Record(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, client *river.Client[pgx.Tx], r Request) (mailstore.Mutation, bool, error) {
	kind, ok := Kinds[strings.TrimSpace(r.Kind)]
	if !ok {
		return mailstore.Mutation{}, false, ErrUnknownKind
	}
	if r.RequestID == "" {
		r.RequestID = uuid.NewString()
	}
	if len(r.RequestID) > 200 || strings.TrimSpace(r.RequestID) != r.RequestID || strings.ContainsFunc(r.RequestID, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return mailstore.Mutation{}, false, ErrRequestIDInvalid
	}
	// A request asked again is answered with its change even once the
	// change has moved the email out of what is served.
	if prior, found, err := mailstore.ReadMutationByRequest(ctx, pool, r.RequestID); err != nil {
		return mailstore.Mutation{}, false, err
	} else if found {
		if prior.EmailID != r.EmailID || prior.Kind != kind || prior.DestinationAlias != config.NormalizeAlias(r.DestinationAlias) {
			return mailstore.Mutation{}, false, ErrRequestIDReused
		}
		return prior, false, nil
	}
	email, found, err := mailstore.ReadMutableEmail(ctx, pool, r.EmailID)
	switch {
	case err != nil:
		return mailstore.Mutation{}, false, err
	case !found:
		return mailstore.Mutation{}, false, ErrEmailUnknown
	case email.Tombstoned:
		return mailstore.Mutation{}, false, ErrEmailTombstoned
	}
	account, ok := configuredAccount(cfg, email.AccountKey)
	if !ok {
		return mailstore.Mutation{}, false, ErrAccountNotConfigured
	}
	req := mailstore.MutationRequest{EmailID: email.ID, Kind: kind, RequestID: r.RequestID}
	alias := config.NormalizeAlias(r.DestinationAlias)
	switch {
	case kind.Places() && alias == "":
		return mailstore.Mutation{}, false, ErrDestinationRequired
	case !kind.Places() && alias != "":
		return mailstore.Mutation{}, false, ErrDestinationUnwanted
	case kind.Places():
		if !aliasConfigured(account, alias) {
			return mailstore.Mutation{}, false, ErrAliasUnknown
		}
		b, found, err := mailstore.LatestBinding(ctx, pool, email.AccountID, alias)
		switch {
		case err != nil:
			return mailstore.Mutation{}, false, err
		case !found:
			return mailstore.Mutation{}, false, ErrAliasUnresolved
		case b.ID == email.FolderID && kind == mailstore.MutationRelocate:
			return mailstore.Mutation{}, false, ErrSameFolder
		}
		req.DestinationFolderID = b.ID
	}
	var (
		m       mailstore.Mutation
		created bool
	)
	err = mailstore.RetryConflicts(ctx, pool, 3, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		m, created, err = mailstore.RecordMutation(ctx, tx, req, time.Now())
		if err != nil || !created {
			return err
		}
		return Schedule(ctx, tx, client, account.ID, m)
	})
	switch {
	case errors.Is(err, mailstore.ErrRequestIDReused):
		return mailstore.Mutation{}, false, ErrRequestIDReused
	case errors.Is(err, mailstore.ErrEmailNotServed):
		return mailstore.Mutation{}, false, ErrEmailTombstoned
	case err != nil:
		return mailstore.Mutation{}, false, err
	}
	return m, created, nil
}

// Schedule inserts, in tx, the job that carries m on from its stage.
func Schedule(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], accountID string, m mailstore.Mutation) error {
	if _, err := client.InsertTx(ctx, tx, jobs.MutationStage{AccountID: accountID, MutationID: m.ID.String(), Stage: string(m.Stage)}, nil); err != nil {
		return fmt.Errorf("mutation: schedule the stage job: %w", err)
	}
	return nil
}

func configuredAccount(cfg *config.Config, key string) (config.Account, bool) {
	for _, a := range cfg.Accounts {
		if config.AccountKey(a.ID) == key {
			return a, true
		}
	}
	return config.Account{}, false
}

func aliasConfigured(a config.Account, alias string) bool {
	for _, f := range a.Folders {
		if f.Alias == alias {
			return true
		}
	}
	return false
}
