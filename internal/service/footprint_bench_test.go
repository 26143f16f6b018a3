package service_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/service"
	"github.com/mailfathom/mailfathom/internal/slots"
)

// BenchmarkAccountFootprint reports the heap serve keeps per configured
// polling account once every account has run, measured after a garbage
// collection: the account's configuration (with its serve options), and
// the two mailbox resilience pipelines a run leaves behind with their
// metric series. The concurrency gate, the write connections and the
// token cache keep nothing for an account that is not working. The target
// is at most 20 KB per account.
func BenchmarkAccountFootprint(b *testing.B) {
	const accounts = 1000
	dir := b.TempDir()
	pw := filepath.Join(dir, "password")
	require.NoError(b, os.WriteFile(pw, []byte("secret\n"), 0o600))
	environ := []string{"MAILFATHOM_SYNC_ENABLED=true"}
	for i := range accounts {
		p := fmt.Sprintf("MAILFATHOM_ACCOUNTS_%d_", i)
		environ = append(environ,
			p+"ID=account-"+fmt.Sprint(i), p+"HOST=imap.example.test", p+"PORT=993",
			p+"USERNAME=user"+fmt.Sprint(i)+"@example.test", p+"PASSWORD=file:"+pw)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	ctx := context.Background()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for range b.N {
		before := heap()
		cfg, err := config.Load(environ)
		require.NoError(b, err)
		opts := service.OptionsFromConfig(cfg, nil)
		afterConfig := heap()

		reg, err := outbound.NewRegistry(cfg.Resilience, logger, prometheus.NewRegistry())
		require.NoError(b, err)
		gate, err := slots.NewGate(slots.Bounds{MaxAccounts: cfg.Sync.MaxConcurrentAccounts, MaxFoldersPerAccount: cfg.Sync.MaxConcurrentFoldersPerAccount})
		require.NoError(b, err)
		base := heap()
		for _, a := range cfg.Accounts {
			key := config.AccountKey(a.ID)
			leave, err := gate.Enter(ctx, key, "", 0, nil)
			require.NoError(b, err)
			for _, class := range []resilience.DependencyClass{resilience.MailboxSessionEstablishment, resilience.MailboxDataRetrieval} {
				require.NoError(b, reg.Execute(ctx, resilience.Key{Class: class, Instance: key}, "INBOX", func(context.Context) error { return nil }))
			}
			leave()
		}
		afterRuns := heap()

		cfgPer := float64(int64(afterConfig)-int64(before)) / accounts
		runPer := float64(int64(afterRuns)-int64(base)) / accounts
		b.ReportMetric(cfgPer, "config_B/account")
		b.ReportMetric(runPer, "after_run_B/account")
		b.ReportMetric(cfgPer+runPer, "B/account")
		runtime.KeepAlive(opts)
		runtime.KeepAlive(reg)
		runtime.KeepAlive(gate)
	}
}
