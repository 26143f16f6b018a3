package resilience_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

// BenchmarkInstanceMemory reports the heap an account's two mailbox
// pipelines keep once it has run, metrics registered: what every
// configured account costs a process for as long as it runs.
func BenchmarkInstanceMemory(b *testing.B) {
	reg, err := resilience.NewRegistry(resilience.Options{
		Budgets:     resilience.DefaultBudgets(),
		Classifiers: testClassifiers(),
		Logger:      slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Registerer:  prometheus.NewPedanticRegistry(),
	})
	require.NoError(b, err)
	ctx := context.Background()
	run := func(instance string) {
		for _, class := range []resilience.DependencyClass{resilience.MailboxSessionEstablishment, resilience.MailboxDataRetrieval} {
			require.NoError(b, reg.Execute(ctx, resilience.Key{Class: class, Instance: instance}, "INBOX", func(context.Context) error { return nil }))
		}
	}
	run("warm-up")
	const accounts = 1000
	var before, after runtime.MemStats
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for a := range accounts {
			run(strconv.Itoa(i) + "-" + strconv.Itoa(a))
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/accounts, "B/account")
		b.StartTimer()
	}
	runtime.KeepAlive(reg)
}
