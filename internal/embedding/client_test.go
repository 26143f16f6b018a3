package embedding_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
)

const secretKey = "SENTINEL-embedding-key"

func TestClient(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx    context.Context
		srv    *embedtest.Server
		client *embedding.Client
		budget resilience.Budget
	}
	setup := func(t *testing.T, srvOpts embedtest.Options, withKey string) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		srv := embedtest.Start(t, srvOpts)
		budget := resilience.DefaultBudgets()[resilience.AiProviderInvocation]
		budget.BaseDelay, budget.MaxDelay = time.Millisecond, 5*time.Millisecond
		budget.AttemptTimeout, budget.TotalTimeout = 300*time.Millisecond, 5*time.Second
		budget.CircuitBreakerMinimumThroughput = 1000
		reg, err := outbound.NewRegistry(map[resilience.DependencyClass]resilience.Budget{resilience.AiProviderInvocation: budget}, nil, nil)
		require.NoError(t, err)
		opts := embedding.Options{URL: srv.URL, Profile: embedding.Profile{Model: "test-model", Dimensions: 32}, Registry: reg}
		if withKey != "" {
			path := filepath.Join(t.TempDir(), "key")
			require.NoError(t, os.WriteFile(path, []byte(withKey), 0o600))
			ref, err := secret.ParseReference("file:" + path)
			require.NoError(t, err)
			opts.APIKey = ref
		}
		client, err := embedding.NewClient(opts)
		require.NoError(t, err)
		return &testBundle{ctx: ctx, srv: srv, client: client, budget: budget}
	}
	texts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("passage number %d about harbour cranes", i)
		}
		return out
	}
	noSecret := func(t *testing.T, err error) {
		t.Helper()
		require.NotContains(t, err.Error(), "SENTINEL")
	}

	t.Run("EmbedsInOrderInRequestsOfBoundedSize", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		in := texts(embedding.MaxInputsPerRequest + 3)
		vs, err := b.client.Embed(b.ctx, in)
		require.NoError(t, err)
		require.Len(t, vs, len(in))
		require.Equal(t, 2, b.srv.Requests())
		require.Equal(t, 2, b.srv.Model("test-model"), "every request names the model")
		for i, v := range vs {
			var norm float64
			for _, x := range v {
				norm += float64(x) * float64(x)
			}
			require.InDelta(t, 1, math.Sqrt(norm), 1e-4)
			want := embedtest.Embed(in[i], 32)
			for j := range v {
				require.InDelta(t, want[j], v[j], 1e-5, "vector %d is its text's", i)
			}
		}
	})

	t.Run("SendsTheAPIKeyAndNeverReportsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32, APIKey: secretKey}, secretKey)
		_, err := b.client.Embed(b.ctx, texts(1))
		require.NoError(t, err)

		refused := setup(t, embedtest.Options{Dimensions: 32, APIKey: "another"}, secretKey)
		_, err = refused.client.Embed(refused.ctx, texts(1))
		require.Error(t, err)
		noSecret(t, err)
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureRequestRefused, id)
		var se *embedding.StatusError
		require.ErrorAs(t, err, &se)
		require.True(t, strings.HasSuffix(se.Error(), " ["+id+"]"), "the text ends with the identity: %v", se)
		require.Equal(t, 1, refused.srv.Requests(), "a refused key is never repeated")
	})

	t.Run("TooManyRequestsHonoursRetryAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.TooManyRequests, RetryAfter: time.Second, Times: 1})
		start := time.Now()
		_, err := b.client.Embed(b.ctx, texts(2))
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), time.Second, "the wait the provider asked for, beyond MaxDelay")
		require.Equal(t, 2, b.srv.Requests())
	})

	t.Run("ServerErrorsAreRepeatedWithinTheBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		_, err := b.client.Embed(b.ctx, texts(1))
		var se *embedding.StatusError
		require.ErrorAs(t, err, &se)
		require.Equal(t, 500, se.Status)
		require.True(t, se.RetryLater())
		require.Equal(t, b.budget.MaxAttempts, b.srv.Requests())
	})

	t.Run("AHangingProviderIsAbandonedAtTheAttemptTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.Hang})
		start := time.Now()
		_, err := b.client.Embed(b.ctx, texts(1))
		require.Error(t, err)
		require.Less(t, time.Since(start), 3*time.Second)
		require.True(t, resilience.IsDependencyUnavailable(err), "%v", err)
	})

	t.Run("WrongShapesAreNamedTerminalFailures", func(t *testing.T) {
		t.Parallel()
		for kind, want := range map[embedtest.FaultKind]string{
			embedtest.WrongDimension: embedding.FailureDimensionMismatch,
			embedtest.WrongCount:     embedding.FailureCountMismatch,
		} {
			b := setup(t, embedtest.Options{Dimensions: 32}, "")
			b.srv.SetFault(embedtest.Fault{Kind: kind})
			_, err := b.client.Embed(b.ctx, texts(3))
			id, ok := failure.Identity(err)
			require.True(t, ok)
			require.Equal(t, want, id)
			require.True(t, strings.HasSuffix(err.Error(), " ["+want+"]"), "the text ends with the identity: %v", err)
			require.Equal(t, 1, b.srv.Requests(), "an answer of the wrong shape is not asked for again")
			require.False(t, strings.Contains(err.Error(), "harbour"), "no text in the error")
		}
	})

	const marker = "UNEMBEDDABLE"
	marked := func(in []string, at ...int) []string {
		for _, i := range at {
			in[i] += " " + marker
		}
		return in
	}

	t.Run("ARefusedTextIsIsolatedByHalving", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetRefusal(embedtest.Refusal{Marker: marker, Status: 400})
		in := marked(texts(embedding.MaxInputsPerRequest+3), 37)
		vs, refused, err := b.client.EmbedEach(b.ctx, in)
		require.NoError(t, err)
		require.Equal(t, []embedding.Refusal{{Index: 37, Status: 400}}, refused)
		require.Len(t, vs, len(in))
		for i, v := range vs {
			if i == 37 {
				require.Nil(t, v, "the refused text has no vector")
				continue
			}
			var cos float64
			for j, x := range embedtest.Embed(in[i], 32) {
				cos += float64(x) * float64(v[j])
			}
			require.InDelta(t, 1, cos, 1e-5, "text %d has its own vector", i)
		}
		// The first request, two halves at each of the 6 levels down to
		// the refused text, and the request of the last 3.
		require.Equal(t, 1+2*6+1, b.srv.Requests())
	})

	t.Run("IsolationIsBoundedByTheHalvingDepth", func(t *testing.T) {
		t.Parallel()
		for _, status := range []int{400, 413, 422} {
			b := setup(t, embedtest.Options{Dimensions: 32}, "")
			b.srv.SetRefusal(embedtest.Refusal{Marker: marker, Status: status})
			in := marked(texts(embedding.MaxInputsPerRequest), 0, 5, 63)
			vs, refused, err := b.client.EmbedEach(b.ctx, in)
			require.NoError(t, err)
			require.Equal(t, []embedding.Refusal{{Index: 0, Status: status}, {Index: 5, Status: status}, {Index: 63, Status: status}}, refused)
			n := 0
			for _, v := range vs {
				if v != nil {
					n++
				}
			}
			require.Equal(t, len(in)-3, n, "every text but the refused has its vector")
			require.LessOrEqual(t, b.srv.Requests(), 1+3*2*6, "at most 12 requests more per refused text")
			require.Equal(t, len(in)-3, b.srv.Inputs(), "no text is embedded twice")
		}
	})

	t.Run("ASingleTextRefusedIsARefusal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetRefusal(embedtest.Refusal{Marker: marker, Status: 422})
		vs, refused, err := b.client.EmbedEach(b.ctx, marked(texts(1), 0))
		require.NoError(t, err)
		require.Equal(t, [][]float32{nil}, vs)
		require.Equal(t, []embedding.Refusal{{Index: 0, Status: 422}}, refused)
		require.Equal(t, 1, b.srv.Requests())

		// Embed, for a query, isolates nothing: the refusal is its failure.
		_, err = b.client.Embed(b.ctx, marked(texts(2), 1))
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureInputRefused, id)
		status, ok := embedding.InputRefused(err)
		require.True(t, ok)
		require.Equal(t, 422, status)
		require.Equal(t, 2, b.srv.Requests())
	})

	t.Run("ARequestRefusedAsAWholeIsNotIsolated", func(t *testing.T) {
		t.Parallel()
		for name, refuse := range map[string]func(*embedtest.Server){
			"Unauthorized": func(s *embedtest.Server) { s.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized}) },
			"Forbidden":    func(s *embedtest.Server) { s.SetRefusal(embedtest.Refusal{Marker: marker, Status: 403}) },
		} {
			b := setup(t, embedtest.Options{Dimensions: 32}, "")
			refuse(b.srv)
			_, refused, err := b.client.EmbedEach(b.ctx, marked(texts(8), 3))
			require.Error(t, err, name)
			require.Empty(t, refused, name)
			id, _ := failure.Identity(err)
			require.Equal(t, embedding.FailureRequestRefused, id, name)
			_, ok := embedding.InputRefused(err)
			require.False(t, ok, name)
			require.Equal(t, 1, b.srv.Requests(), "%s: neither repeated nor split", name)
		}

		// A repeatable status is the pipeline's to repeat, never split.
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		_, _, err := b.client.EmbedEach(b.ctx, texts(8))
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureProviderUnavailable, id)
		require.Equal(t, b.budget.MaxAttempts, b.srv.Requests())
	})

	t.Run("EveryTextRefusedOnItsOwnRefusesTheRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetRefusal(embedtest.Refusal{Marker: marker, Status: 400})
		_, refused, err := b.client.EmbedEach(b.ctx, marked(texts(4), 0, 1, 2, 3))
		require.Error(t, err)
		require.Empty(t, refused, "a provider refusing everything records nothing as refused")
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureRequestRefused, id)
		require.NotContains(t, err.Error(), "harbour", "no text in the error")
		require.Equal(t, 7, b.srv.Requests(), "the whole tree of 4 texts, and no more")
	})
}
