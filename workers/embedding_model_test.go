package workers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// profiles returns the recorded embedding profiles.
func (b *syncBundle) profiles(t *testing.T) []searchindex.Profile {
	t.Helper()
	ps, err := searchindex.Profiles(context.Background(), b.pool)
	require.NoError(t, err)
	return ps
}

// appendMail appends the messages from to until of series to the INBOX.
func (b *syncBundle) appendMail(series uint64, from, until int) {
	for i := from; i < until; i++ {
		b.user.Append("INBOX", mailgen.Message(series, i, 1500), time.Now())
	}
}

// refusedEmbedJobs is how many embed jobs were cancelled, each with the
// model-changed failure naming both models in River's record of it.
func (b *syncBundle) refusedEmbedJobs(t *testing.T, recorded, answered string) int {
	t.Helper()
	n := 0
	for _, j := range dbassert.Jobs(t, b.pool, "embed_email") {
		if j.State != rivertype.JobStateCancelled {
			continue
		}
		text := j.LastError()
		require.True(t, strings.HasSuffix(text, "["+embedding.FailureModelChanged+"]"), "%s", text)
		require.Contains(t, text, `"`+recorded+`"`)
		require.Contains(t, text, `"`+answered+`"`)
		n++
	}
	return n
}

func TestEmbeddingModel(t *testing.T) {
	t.Parallel()

	t.Run("AnotherAnsweredModelFailsTheJobAndWritesNoVector", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 1)
		b.appendMail(31, 0, 3)
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		ps := b.profiles(t)
		require.Len(t, ps, 1)
		require.Equal(t, "test-model", ps[0].AnsweredModel, "the answered model is recorded")

		// Another provider URL answering the same model name: the profile
		// goes on, its vectors written as before.
		moved := embedtest.Start(t, embedtest.Options{Dimensions: embedDims})
		b.embedding.ProviderURL = moved.URL
		b.start(t)
		b.appendMail(31, 3, 5)
		b.runAgain(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		require.Positive(t, moved.Inputs())
		require.Equal(t, ps, b.profiles(t), "the same profile")
		vectors := b.vectorCount(t)

		// The provider starts answering another model under the name: its
		// vectors are refused and the jobs fail with the named failure.
		moved.SetAnsweredModel("other-model")
		b.appendMail(31, 5, 7)
		b.runAgain(t)
		require.Equal(t, int64(2), b.awaiting(t, "test-model"))
		require.Equal(t, vectors, b.vectorCount(t), "no vector of the refused answers is written")
		refused := b.refusedEmbedJobs(t, "test-model", "other-model")
		require.Positive(t, refused, "jobs:\n%s", b.jobHistory(t))
		require.Equal(t, refused, b.countLog(line("failed permanently", "failure", embedding.FailureModelChanged)),
			"logged once per job; logs:\n%s", b.logs.String())
		require.Equal(t, ps, b.profiles(t), "the recorded model is kept")
	})

	t.Run("AnAnswerWithoutAModelIsAccepted", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 1)
		silent := embedtest.Start(t, embedtest.Options{Dimensions: embedDims, OmitModel: true})
		b.embedding.ProviderURL = silent.URL
		b.appendMail(32, 0, 3)
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		require.Positive(t, silent.Inputs())
		require.Empty(t, b.profiles(t)[0].AnsweredModel, "nothing to record")

		// The first answer that names a model records it.
		naming := embedtest.Start(t, embedtest.Options{Dimensions: embedDims, AnsweredModel: "test-model:latest"})
		b.embedding.ProviderURL = naming.URL
		b.start(t)
		b.appendMail(32, 3, 5)
		b.runAgain(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		require.Equal(t, "test-model:latest", b.profiles(t)[0].AnsweredModel)
	})

	t.Run("TheFirstAnsweredModelIsRecordedWhateverTheConfiguredName", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := withEmbedding(t, b, "bge-m3", 1)
		srv.SetAnsweredModel("BAAI/bge-m3")
		b.appendMail(33, 0, 3)
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "bge-m3"), "a provider answering the model it serves is not refused; logs:\n%s", b.logs.String())
		require.Equal(t, "BAAI/bge-m3", b.profiles(t)[0].AnsweredModel)
		require.Equal(t, 1, b.countLog(line("the embedding provider answers another model name than the one configured; the profile's vectors are recorded as that model's",
			"configured_model", "bge-m3", "answered_model", "BAAI/bge-m3")), "logs:\n%s", b.logs.String())

		// Ollama's default tag names the same model.
		srv.SetAnsweredModel("BAAI/bge-m3:latest")
		b.appendMail(33, 3, 5)
		b.runAgain(t)
		require.Zero(t, b.awaiting(t, "bge-m3"))

		// The configured name is another model than the recorded one once
		// answers named that.
		srv.SetAnsweredModel("")
		b.appendMail(33, 5, 6)
		b.runAgain(t)
		require.Equal(t, int64(1), b.awaiting(t, "bge-m3"))
		require.Positive(t, b.refusedEmbedJobs(t, "BAAI/bge-m3", "bge-m3"))
	})
}
