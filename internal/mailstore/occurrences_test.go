package mailstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestUpsertOccurrence(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		folder mailstore.Binding
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		return ctx, &testBundle{pool: pool, folder: bind(ctx, t, pool, "a", "INBOX", "INBOX")}
	}
	occurrence := func(b *testBundle, uid uint32, raw string) mailstore.Occurrence {
		return mailstore.Occurrence{
			AccountID: b.folder.AccountID, FolderID: b.folder.ID, UIDValidity: 42, UID: uid,
			Size:         int64(len(raw)),
			InternalDate: time.Date(2025, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 2*3600)),
			Flags:        []string{`\Seen`, "$Label1"},
			Subject:      "Hello",
			MessageID:    "<m1@example.org>",
			SentAt:       time.Date(2025, 5, 6, 6, 0, 0, 0, time.UTC),
			Availability: mailstore.Available,
			Raw:          []byte(raw),
		}
	}
	upsert := func(ctx context.Context, t *testing.T, b *testBundle, o mailstore.Occurrence) uuid.UUID {
		t.Helper()
		id, err := mailstore.UpsertOccurrence(ctx, b.pool, o)
		require.NoError(t, err)
		return id
	}
	readOcc := func(ctx context.Context, t *testing.T, b *testBundle, uid uint32) mailstore.StoredOccurrence {
		t.Helper()
		s, found, err := mailstore.ReadOccurrence(ctx, b.pool, b.folder.ID, 42, uid)
		require.NoError(t, err)
		require.True(t, found)
		return s
	}
	contentRows := func(ctx context.Context, t *testing.T, b *testBundle) int {
		t.Helper()
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM email_message_contents`).Scan(&n))
		return n
	}

	t.Run("StoresMetadataAndContent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		raw := "Subject: Hello\r\n\r\nbody\r\n"
		o := occurrence(b, 7, raw)
		id := upsert(ctx, t, b, o)
		require.Equal(t, uuid.Version(7), id.Version())

		s := readOcc(ctx, t, b, 7)
		sum := sha256.Sum256([]byte(raw))
		require.Equal(t, mailstore.StoredOccurrence{
			ID: id, Availability: mailstore.Available, Size: int64(len(raw)),
			InternalDate: s.InternalDate, Flags: []string{`\Seen`, "$Label1"},
			Subject: "Hello", MessageID: "<m1@example.org>", SentAt: s.SentAt,
			ContentLength: ptr(int64(len(raw))), ContentSHA256: sum[:],
		}, s)
		require.True(t, s.InternalDate.Equal(o.InternalDate))
		require.True(t, s.SentAt.Equal(o.SentAt))

		var (
			stored         []byte
			flagsObserved  *time.Time
			expungeObserve *time.Time
		)
		require.NoError(t, b.pool.QueryRow(ctx,
			`SELECT c.raw_mime, e.remote_flags_observed_at, e.remote_expunge_observed_at
			 FROM stored_emails e JOIN email_message_contents c ON c.stored_email_id = e.id WHERE e.id = $1`, id,
		).Scan(&stored, &flagsObserved, &expungeObserve))
		require.Equal(t, raw, string(stored))
		require.Nil(t, flagsObserved, "flags given without an observation time are stored unobserved")
		require.Nil(t, expungeObserve)
	})

	t.Run("FlagsObservedAtIsAnObservationThatNeverMovesBackwards", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		observed := func() (time.Time, []string) {
			t.Helper()
			var at time.Time
			var flags []string
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_flags_observed_at, remote_flags FROM stored_emails
				WHERE mail_folder_id = $1 AND uid = 7`, b.folder.ID).Scan(&at, &flags))
			return at, flags
		}
		fetched := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		o := occurrence(b, 7, "body")
		o.FlagsObservedAt = fetched
		upsert(ctx, t, b, o)
		at, flags := observed()
		require.True(t, at.Equal(fetched), "the fetch's moment is the row's observation")
		require.Equal(t, []string{`\Seen`, "$Label1"}, flags)

		// An older reading (a pass that fetched before the one that wrote)
		// does not replace a newer one.
		older := o
		older.Flags, older.FlagsObservedAt = []string{`\Flagged`}, fetched.Add(-time.Minute)
		upsert(ctx, t, b, older)
		at, flags = observed()
		require.True(t, at.Equal(fetched))
		require.Equal(t, []string{`\Seen`, "$Label1"}, flags)

		newer := o
		newer.Flags, newer.FlagsObservedAt = []string{`\Answered`}, fetched.Add(time.Minute)
		upsert(ctx, t, b, newer)
		at, flags = observed()
		require.True(t, at.Equal(newer.FlagsObservedAt))
		require.Equal(t, []string{`\Answered`}, flags)
	})

	t.Run("IdempotentKeepsTheID", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 7, "same")
		first := upsert(ctx, t, b, o)
		again := upsert(ctx, t, b, o)
		require.Equal(t, first, again)
		n, err := mailstore.CountOccurrences(ctx, b.pool, b.folder.ID)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.Equal(t, 1, contentRows(ctx, t, b))
	})

	t.Run("UnchangedContentIsNotRewritten", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 7, "same")
		id := upsert(ctx, t, b, o)
		contentVersion := func() string {
			var xmin string
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT xmin::text FROM email_message_contents WHERE stored_email_id = $1`, id).Scan(&xmin))
			return xmin
		}
		before := contentVersion()
		o.Flags = []string{`\Seen`, `\Flagged`}
		upsert(ctx, t, b, o)
		require.Equal(t, before, contentVersion(), "same SHA-256: the content row was not rewritten")
		require.Equal(t, []string{`\Seen`, `\Flagged`}, readOcc(ctx, t, b, 7).Flags, "the metadata was")
	})

	t.Run("ResynchronizingOverwrites", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 7, "first version")
		id := upsert(ctx, t, b, o)

		o.Raw = []byte("second, longer version")
		o.Size = int64(len(o.Raw))
		o.Flags = nil
		o.Subject, o.MessageID = "", ""
		o.SentAt, o.InternalDate = time.Time{}, time.Time{}
		require.Equal(t, id, upsert(ctx, t, b, o))

		s := readOcc(ctx, t, b, 7)
		sum := sha256.Sum256(o.Raw)
		require.Equal(t, sum[:], s.ContentSHA256)
		require.Equal(t, ptr(int64(len(o.Raw))), s.ContentLength)
		require.Equal(t, []string{}, s.Flags, "no flags is an empty array")
		require.Empty(t, s.Subject)
		require.Empty(t, s.MessageID)
		require.True(t, s.SentAt.IsZero())
		require.True(t, s.InternalDate.IsZero())
		require.Equal(t, 1, contentRows(ctx, t, b))
	})

	t.Run("ExceededSizeLimitStoresNoContent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 9, "")
		o.Raw, o.Size, o.Availability = nil, 50<<20, mailstore.ExceededSizeLimit
		id := upsert(ctx, t, b, o)
		s := readOcc(ctx, t, b, 9)
		require.Equal(t, id, s.ID)
		require.Equal(t, mailstore.ExceededSizeLimit, s.Availability)
		require.EqualValues(t, 50<<20, s.Size)
		require.Nil(t, s.ContentLength)
		require.Nil(t, s.ContentSHA256)
		require.Equal(t, 0, contentRows(ctx, t, b))

		// Fetched later, under a raised limit: the content arrives.
		o.Raw, o.Availability = []byte("now small enough"), mailstore.Available
		require.Equal(t, id, upsert(ctx, t, b, o))
		s = readOcc(ctx, t, b, 9)
		require.Equal(t, mailstore.Available, s.Availability)
		require.NotNil(t, s.ContentLength)
	})

	t.Run("StoredContentOutlivesALoweredLimit", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 9, "stored content")
		id := upsert(ctx, t, b, o)
		o.Raw, o.Availability, o.Subject = nil, mailstore.ExceededSizeLimit, "Renamed"
		require.Equal(t, id, upsert(ctx, t, b, o))
		s := readOcc(ctx, t, b, 9)
		require.Equal(t, mailstore.Available, s.Availability, "the content it has stays, and so does its availability")
		require.Equal(t, ptr(int64(len("stored content"))), s.ContentLength)
		require.Equal(t, "Renamed", s.Subject, "the metadata is still overwritten")
	})

	t.Run("EmptyContentIsContent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 3, "")
		o.Raw = []byte{}
		upsert(ctx, t, b, o)
		s := readOcc(ctx, t, b, 3)
		require.Equal(t, ptr(int64(0)), s.ContentLength)
		require.Equal(t, mailstore.Available, s.Availability)
	})

	t.Run("GenerationsAndScopesAreSeparateIdentities", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 7, "x")
		first := upsert(ctx, t, b, o)

		o.UIDValidity = 43
		otherScope := upsert(ctx, t, b, o)
		require.NotEqual(t, first, otherScope)

		repointed := bind(ctx, t, b.pool, "a", "INBOX", "Elsewhere")
		require.Equal(t, 2, repointed.Generation)
		o.FolderID, o.UIDValidity = repointed.ID, 42
		otherGeneration := upsert(ctx, t, b, o)
		require.NotEqual(t, first, otherGeneration)

		n, err := mailstore.CountOccurrences(ctx, b.pool, b.folder.ID)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		n, err = mailstore.CountOccurrences(ctx, b.pool, repointed.ID)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	})

	t.Run("ForeignFolderRejected", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		other := bind(ctx, t, b.pool, "b", "INBOX", "INBOX")
		o := occurrence(b, 7, "x")
		o.FolderID = other.ID // another account's binding
		_, err := mailstore.UpsertOccurrence(ctx, b.pool, o)
		require.ErrorIs(t, err, mailstore.ErrForeignFolder)

		o.FolderID = other.ID + 1000 // no binding at all
		_, err = mailstore.UpsertOccurrence(ctx, b.pool, o)
		require.ErrorIs(t, err, mailstore.ErrForeignFolder)
		require.Equal(t, 0, contentRows(ctx, t, b))
	})

	t.Run("ServerTextIsMadeStorable", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		o := occurrence(b, 7, "x")
		o.Subject = "caf\xe9 \x00menu"
		o.MessageID = "<\xff@x>"
		o.Flags = []string{"bad\xfe"}
		upsert(ctx, t, b, o)
		s := readOcc(ctx, t, b, 7)
		require.Equal(t, "caf\uFFFD \uFFFDmenu", s.Subject)
		require.Equal(t, "<\uFFFD@x>", s.MessageID)
		require.Equal(t, []string{"bad\uFFFD"}, s.Flags)
	})

	t.Run("InvalidOccurrencesRejected", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		for name, mutate := range map[string]func(*mailstore.Occurrence){
			"AvailableWithoutContent": func(o *mailstore.Occurrence) { o.Raw = nil },
			"ExceededWithContent":     func(o *mailstore.Occurrence) { o.Availability = mailstore.ExceededSizeLimit },
			"UnknownAvailability":     func(o *mailstore.Occurrence) { o.Availability = "NotFetched" },
			"ZeroUID":                 func(o *mailstore.Occurrence) { o.UID = 0 },
			"ZeroUIDValidity":         func(o *mailstore.Occurrence) { o.UIDValidity = 0 },
			"NoAccount":               func(o *mailstore.Occurrence) { o.AccountID = 0 },
			"NegativeSize":            func(o *mailstore.Occurrence) { o.Size = -1 },
		} {
			o := occurrence(b, 7, "secret body")
			o.Subject = "secret subject"
			mutate(&o)
			_, err := mailstore.UpsertOccurrence(ctx, b.pool, o)
			require.Error(t, err, name)
			require.NotContains(t, err.Error(), "secret", name)
		}
		n, err := mailstore.CountOccurrences(ctx, b.pool, b.folder.ID)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("InsideACallersTransaction", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx := begin(ctx, t, b.pool)
		_, err := mailstore.UpsertOccurrence(ctx, tx, occurrence(b, 7, "x"))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		_, found, err := mailstore.ReadOccurrence(ctx, b.pool, b.folder.ID, 42, 7)
		require.NoError(t, err)
		require.False(t, found)
		require.Equal(t, 0, contentRows(ctx, t, b))
	})

	t.Run("StoredUIDs", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		for _, uid := range []uint32{30, 4, 4294967295, 17} {
			upsert(ctx, t, b, occurrence(b, uid, "x"))
		}
		o := occurrence(b, 5, "x")
		o.UIDValidity = 41
		upsert(ctx, t, b, o)

		uids, err := mailstore.StoredUIDs(ctx, b.pool, b.folder.ID, 42)
		require.NoError(t, err)
		require.Equal(t, []uint32{4, 17, 30, 4294967295}, uids)
		uids, err = mailstore.StoredUIDs(ctx, b.pool, b.folder.ID, 41)
		require.NoError(t, err)
		require.Equal(t, []uint32{5}, uids)
		uids, err = mailstore.StoredUIDs(ctx, b.pool, b.folder.ID, 40)
		require.NoError(t, err)
		require.Empty(t, uids)

		_, found, err := mailstore.ReadOccurrence(ctx, b.pool, b.folder.ID, 42, 5)
		require.NoError(t, err)
		require.False(t, found)
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := mailstore.UpsertOccurrence(canceled, b.pool, occurrence(b, 7, "x"))
		require.True(t, errors.Is(err, context.Canceled), err)
	})
}
