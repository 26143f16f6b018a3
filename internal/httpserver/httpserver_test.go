package httpserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/httpserver"
)

func TestMux(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		srv      *httptest.Server
		readyErr atomic.Pointer[error]
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{}
		reg := prometheus.NewRegistry()
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "mailfathom_test_total", Help: "test"})
		reg.MustRegister(c)
		c.Inc()
		b.srv = httptest.NewServer(httpserver.NewMux(httpserver.Routes{
			Ready: func(context.Context) error {
				if err := b.readyErr.Load(); err != nil {
					return *err
				}
				return nil
			},
			Gatherer: reg,
		}))
		t.Cleanup(b.srv.Close)
		return b
	}

	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	t.Run("Healthz", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		code, _ := get(t, b.srv.URL+"/healthz")
		require.Equal(t, http.StatusOK, code)
	})

	t.Run("ReadyzFollowsTheCheck", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		code, _ := get(t, b.srv.URL+"/readyz")
		require.Equal(t, http.StatusOK, code)
		notCurrent := errors.New("migrations not current")
		b.readyErr.Store(&notCurrent)
		code, body := get(t, b.srv.URL+"/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, body, "migrations not current")
	})

	t.Run("Metrics", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		code, body := get(t, b.srv.URL+"/metrics")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "mailfathom_test_total 1")
	})
}
