package backwardpass_test

import (
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// TestNarrowedPassAsksWhatWasNeverObserved: an occurrence no question has
// described in this folder — what a relocation of MailFathom's own leaves
// when it carries a stored email in, its flags those of the folder it came
// from and unobserved — is asked about by the next pass even where the
// folder's recorded sequence narrows every question to what changed since:
// its flags changed before that sequence, so no narrowed answer would ever
// name it. Both with QRESYNC and with CONDSTORE alone.
func TestNarrowedPassAsksWhatWasNeverObserved(t *testing.T) {
	t.Parallel()
	for name, capability := range map[string]string{
		"QResync":   "",
		"CondStore": "IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN CONDSTORE ESEARCH",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var srv *dovecot.Server
			if capability != "" {
				srv = dovecot.Start(t, dovecot.WithCapability(capability))
			}
			b := setup(t, srv, 30)
			sess := b.open(t)
			b.forwardUntilDone(t, sess, nil)
			require.NotNil(t, b.checkpoint(t).HighestModSeq, "the first synchronization recorded a sequence")

			// The message is read on the server, and a narrowed pass
			// records a sequence past that change.
			b.user.SetFlags(folder, 12, []imap.Flag{imap.FlagSeen}, nil)
			rep := b.pass(t, sess, 50)
			require.True(t, rep.Narrowed)
			require.Equal(t, `\Seen`, b.local(t, 12))

			// The occurrence is left as a carried relocation leaves it.
			dbassert.ClearFlags(t, b.pool, b.binding.ID, 12)

			rep = b.pass(t, sess, 50)
			require.True(t, rep.Narrowed, "the folder's sequence still narrows the question")
			require.Equal(t, `\Seen`, b.local(t, 12), "the never-observed occurrence was asked about: %+v", rep)
			// And the answer is an observation: the next pass asks no more.
			rep = b.pass(t, sess, 50)
			require.Zero(t, rep.NeverObserved, "%+v", rep)
		})
	}
}
