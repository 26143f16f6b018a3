package embedtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestEmbed(t *testing.T) {
	t.Parallel()
	a := embedtest.Embed("The quarterly budget review", 128)
	require.Len(t, a, 128)
	require.InDelta(t, 1, cosine(a, a), 1e-5)
	require.Equal(t, a, embedtest.Embed("The quarterly budget review", 128), "deterministic")
	similar := cosine(a, embedtest.Embed("budgets for the quarter", 128))
	unrelated := cosine(a, embedtest.Embed("hiking trip photos", 128))
	require.Greater(t, similar, unrelated+0.2, "shared words and word parts make vectors closer")
}

func TestServer(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		srv *embedtest.Server
	}
	setup := func(t *testing.T, opts embedtest.Options) *testBundle {
		t.Helper()
		return &testBundle{srv: embedtest.Start(t, opts)}
	}
	post := func(t *testing.T, ctx context.Context, url, key string, inputs ...string) (*http.Response, map[string]any) {
		t.Helper()
		body, err := json.Marshal(map[string]any{"model": "m", "input": inputs})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/embeddings", bytes.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	vectors := func(out map[string]any) [][]any {
		var vs [][]any
		for _, d := range out["data"].([]any) {
			vs = append(vs, d.(map[string]any)["embedding"].([]any))
		}
		return vs
	}

	t.Run("Healthy", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 16})
		resp, out := post(t, context.Background(), b.srv.URL, "", "one", "two")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		vs := vectors(out)
		require.Len(t, vs, 2)
		require.Len(t, vs[0], 16)
		require.Equal(t, 1, b.srv.Requests())
		require.Equal(t, 2, b.srv.Inputs())
		require.Equal(t, 1, b.srv.Model("m"))
	})

	t.Run("AnsweredModel", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{})
		_, out := post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, "m", out["model"], "the request's model by default")
		b.srv.SetAnsweredModel("other")
		_, out = post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, "other", out["model"])
		b.srv.SetAnsweredModel("")
		_, out = post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, "m", out["model"])

		named := setup(t, embedtest.Options{AnsweredModel: "served"})
		_, out = post(t, context.Background(), named.srv.URL, "", "one")
		require.Equal(t, "served", out["model"])

		omitted := setup(t, embedtest.Options{OmitModel: true})
		_, out = post(t, context.Background(), omitted.srv.URL, "", "one")
		require.NotContains(t, out, "model")
		require.Len(t, vectors(out), 1)
	})

	t.Run("APIKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{APIKey: "k"})
		resp, _ := post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		resp, _ = post(t, context.Background(), b.srv.URL, "k", "one")
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("Faults", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 8})
		b.srv.SetFault(embedtest.Fault{Kind: embedtest.TooManyRequests, RetryAfter: 2 * time.Second})
		resp, _ := post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "2", resp.Header.Get("Retry-After"))

		b.srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError, Times: 1})
		resp, _ = post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		resp, _ = post(t, context.Background(), b.srv.URL, "", "one")
		require.Equal(t, http.StatusOK, resp.StatusCode, "healthy again after Times faulty answers")

		b.srv.SetFault(embedtest.Fault{Kind: embedtest.WrongDimension})
		_, out := post(t, context.Background(), b.srv.URL, "", "one")
		require.Len(t, vectors(out)[0], 7)

		b.srv.SetFault(embedtest.Fault{Kind: embedtest.WrongCount})
		_, out = post(t, context.Background(), b.srv.URL, "", "one", "two")
		require.Len(t, vectors(out), 1)

		b.srv.SetFault(embedtest.Fault{Kind: embedtest.Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, _ = post(t, ctx, b.srv.URL, "", "one")
		require.Nil(t, resp, "a hanging server never answers")
		require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	})

	t.Run("RefusesARequestCarryingTheMarker", func(t *testing.T) {
		t.Parallel()
		b := setup(t, embedtest.Options{Dimensions: 8})
		b.srv.SetRefusal(embedtest.Refusal{Marker: "UNEMBEDDABLE", Status: http.StatusRequestEntityTooLarge})
		resp, _ := post(t, context.Background(), b.srv.URL, "", "one", "two UNEMBEDDABLE", "three")
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "one refused input refuses the request")
		resp, out := post(t, context.Background(), b.srv.URL, "", "one", "three")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Len(t, vectors(out), 2)
		require.Equal(t, 1, b.srv.Refused())
		require.Equal(t, 2, b.srv.Inputs(), "a refused request embeds nothing")

		b.srv.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
		resp, _ = post(t, context.Background(), b.srv.URL, "", "two UNEMBEDDABLE")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a fault comes before a refusal")
		require.Equal(t, 1, b.srv.Refused())
	})
}
