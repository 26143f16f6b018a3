package embedding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	newClient := func(t *testing.T, url, withKey string) (*embedding.Client, resilience.Budget) {
		t.Helper()
		budget := resilience.DefaultBudgets()[resilience.AiProviderInvocation]
		budget.BaseDelay, budget.MaxDelay = time.Millisecond, 5*time.Millisecond
		budget.AttemptTimeout, budget.TotalTimeout = 300*time.Millisecond, 5*time.Second
		budget.CircuitBreakerMinimumThroughput = 1000
		reg, err := outbound.NewRegistry(map[resilience.DependencyClass]resilience.Budget{resilience.AiProviderInvocation: budget}, nil, nil)
		require.NoError(t, err)
		opts := embedding.Options{URL: url, Profile: embedding.Profile{Model: "test-model", Dimensions: 32}, Registry: reg}
		if withKey != "" {
			path := filepath.Join(t.TempDir(), "key")
			require.NoError(t, os.WriteFile(path, []byte(withKey), 0o600))
			ref, err := secret.ParseReference("file:" + path)
			require.NoError(t, err)
			opts.APIKey = ref
		}
		client, err := embedding.NewClient(opts)
		require.NoError(t, err)
		return client, budget
	}
	setup := func(t *testing.T, srvOpts embedtest.Options, withKey string) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		srv := embedtest.Start(t, srvOpts)
		client, budget := newClient(t, srv.URL, withKey)
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
		vs, _, err := b.client.Embed(b.ctx, in)
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
		_, _, err := b.client.Embed(b.ctx, texts(1))
		require.NoError(t, err)

		refused := setup(t, embedtest.Options{Dimensions: 32, APIKey: "another"}, secretKey)
		_, _, err = refused.client.Embed(refused.ctx, texts(1))
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
		_, _, err := b.client.Embed(b.ctx, texts(2))
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), time.Second, "the wait the provider asked for, beyond MaxDelay")
		require.Equal(t, 2, b.srv.Requests())
	})

	t.Run("ServerErrorsAreRepeatedWithinTheBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		_, _, err := b.client.Embed(b.ctx, texts(1))
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
		_, _, err := b.client.Embed(b.ctx, texts(1))
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
			_, _, err := b.client.Embed(b.ctx, texts(3))
			id, ok := failure.Identity(err)
			require.True(t, ok)
			require.Equal(t, want, id)
			require.True(t, strings.HasSuffix(err.Error(), " ["+want+"]"), "the text ends with the identity: %v", err)
			require.Equal(t, 1, b.srv.Requests(), "an answer of the wrong shape is not asked for again")
			require.False(t, strings.Contains(err.Error(), "harbour"), "no text in the error")
		}
	})

	t.Run("ReturnsTheModelTheAnswerNames", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			opts embedtest.Options
			want string
		}{
			{embedtest.Options{Dimensions: 32}, "test-model"},
			{embedtest.Options{Dimensions: 32, AnsweredModel: "served-model"}, "served-model"},
			{embedtest.Options{Dimensions: 32, OmitModel: true}, ""},
		} {
			b := setup(t, tc.opts, "")
			vs, model, err := b.client.Embed(b.ctx, texts(2))
			require.NoError(t, err)
			require.Len(t, vs, 2)
			require.Equal(t, tc.want, model)
		}
	})

	// scripted answers each request in turn with the next of models as the
	// answer's "model" member (nil leaves the member out).
	scripted := func(t *testing.T, models ...*string) *embedding.Client {
		t.Helper()
		var (
			mu   sync.Mutex
			next int
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Input []string `json:"input"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			mu.Lock()
			model := models[min(next, len(models)-1)]
			next++
			mu.Unlock()
			answer := map[string]any{"object": "list"}
			if model != nil {
				answer["model"] = *model
			}
			var data []map[string]any
			for i, in := range req.Input {
				data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": embedtest.Embed(in, 32)})
			}
			answer["data"] = data
			_ = json.NewEncoder(w).Encode(answer)
		}))
		t.Cleanup(srv.Close)
		client, _ := newClient(t, srv.URL, "")
		return client
	}
	name := func(s string) *string { return &s }

	t.Run("AnswersOfOneCallNamingTwoModelsAreRefused", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		two := texts(embedding.MaxInputsPerRequest + 1)

		_, model, err := scripted(t, name("nomic-embed-text"), name("nomic-embed-text:latest")).Embed(ctx, two)
		require.NoError(t, err, "Ollama's default tag names the same model")
		require.Equal(t, "nomic-embed-text", model)

		_, model, err = scripted(t, nil, name("m2")).Embed(ctx, two)
		require.NoError(t, err, "an answer naming no model is accepted")
		require.Equal(t, "m2", model, "the first answer that names one")

		_, model, err = scripted(t, name("m1"), nil).Embed(ctx, two)
		require.NoError(t, err)
		require.Equal(t, "m1", model)

		vs, _, err := scripted(t, name("m1"), name("m2")).Embed(ctx, two)
		require.Nil(t, vs)
		var changed *embedding.ModelChangedError
		require.ErrorAs(t, err, &changed)
		require.Equal(t, embedding.ModelChangedError{Recorded: "m1", Answered: "m2"}, *changed)
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureModelChanged, id)
		require.True(t, strings.HasSuffix(err.Error(), " ["+id+"]"), "the text ends with the identity: %v", err)
		require.False(t, changed.RetryLater())
	})

	t.Run("AnOverlongModelNameIsMalformed", func(t *testing.T) {
		t.Parallel()
		_, _, err := scripted(t, name(strings.Repeat("m", 257))).Embed(context.Background(), texts(1))
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureAnswerMalformed, id)
		require.NotContains(t, err.Error(), "mmmm", "the name is not repeated")
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
		vs, refused, _, err := b.client.EmbedEach(b.ctx, in)
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
			vs, refused, _, err := b.client.EmbedEach(b.ctx, in)
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
		vs, refused, _, err := b.client.EmbedEach(b.ctx, marked(texts(1), 0))
		require.NoError(t, err)
		require.Equal(t, [][]float32{nil}, vs)
		require.Equal(t, []embedding.Refusal{{Index: 0, Status: 422}}, refused)
		require.Equal(t, 1, b.srv.Requests())

		// Embed, for a query, isolates nothing: the refusal is its failure.
		_, _, err = b.client.Embed(b.ctx, marked(texts(2), 1))
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
			_, refused, _, err := b.client.EmbedEach(b.ctx, marked(texts(8), 3))
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
		_, _, _, err := b.client.EmbedEach(b.ctx, texts(8))
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureProviderUnavailable, id)
		require.Equal(t, b.budget.MaxAttempts, b.srv.Requests())
	})

	t.Run("EveryTextRefusedOnItsOwnRefusesTheRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 32}, "")
		b.srv.SetRefusal(embedtest.Refusal{Marker: marker, Status: 400})
		_, refused, _, err := b.client.EmbedEach(b.ctx, marked(texts(4), 0, 1, 2, 3))
		require.Error(t, err)
		require.Empty(t, refused, "a provider refusing everything records nothing as refused")
		id, _ := failure.Identity(err)
		require.Equal(t, embedding.FailureRequestRefused, id)
		require.NotContains(t, err.Error(), "harbour", "no text in the error")
		require.Equal(t, 7, b.srv.Requests(), "the whole tree of 4 texts, and no more")
	})
}

func TestSameModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"nomic-embed-text", "nomic-embed-text", true},
		{"nomic-embed-text", "nomic-embed-text:latest", true},
		{"nomic-embed-text:latest", "nomic-embed-text", true},
		{"nomic-embed-text", "nomic-embed-text:v1.5", false},
		{"bge-m3", "BAAI/bge-m3", false},
		{"text-embedding-ada-002", "text-embedding-ada-002-v2", false},
		{"a", "b", false},
	} {
		require.Equal(t, tc.same, embedding.SameModel(tc.a, tc.b), "%q %q", tc.a, tc.b)
	}
}
