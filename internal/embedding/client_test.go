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
		require.True(t, failure.IsDependencyUnavailable(err), "%v", err)
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
}
