package workers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailsession"
)

// A failure River would retry ends a folder unit instead — the account's
// next run takes the folder up again — and is recorded either way; an
// account run's is left to River.
func TestFailureMiddlewarePolicies(t *testing.T) {
	t.Parallel()
	var recorded []string
	record := func(_ context.Context, job *rivertype.JobRow, err error) error {
		recorded = append(recorded, job.Kind+":"+failure.Name(err))
		return nil
	}
	m := &failureMiddleware{logger: slog.New(slog.DiscardHandler), policies: map[string]failurePolicy{
		"account_run": {record: record},
		"folder_pass": {record: record, endsJob: true},
	}}
	unavailable := &mailsession.MailboxUnavailableError{Account: "a", Operation: "INBOX", Err: &imapx.TransportError{Op: "UID FETCH", Err: io.EOF}}
	run := func(kind string) error {
		return m.Work(context.Background(), &rivertype.JobRow{ID: 1, Kind: kind}, func(context.Context) error { return unavailable })
	}

	var cancel *rivertype.JobCancelError
	require.ErrorAs(t, run("folder_pass"), &cancel, "a folder unit is not retried on a schedule of its own")
	require.NotErrorAs(t, run("account_run"), &cancel, "an account run is retried by River on the run backoff")
	require.Equal(t, []string{"folder_pass:MailboxUnavailable", "account_run:MailboxUnavailable"}, recorded)

	// A failure that could not be recorded leaves the job to River.
	m.policies["folder_pass"] = failurePolicy{endsJob: true, record: func(context.Context, *rivertype.JobRow, error) error {
		return errors.New("database away")
	}}
	require.NotErrorAs(t, run("folder_pass"), &cancel)
}
