package workers_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

// BenchmarkVectorIndexBuild builds the vector index of a profile whose
// passages are all embedded and in no list — a mailbox embedded before the
// index existed — through the vector_index jobs on one River worker, as
// serve runs them: from the first check's insertion until the generation
// serves, every passage is in its lists and the next check is scheduled
// (the vacuum that follows, which searches do not wait for, is timed
// apart). The passages are 384-dimension synthetic vectors of 1 000
// topics (vectortest), ten a message.
//
// It reports the build's seconds, its steps (one River row each), its
// training's seconds (from the check's log line), the assignment steps'
// seconds and the final vacuum's.
//
//	MAILFATHOM_BENCH_PASSAGES=1000000 MAILFATHOM_BENCH_SEED=1 go test ./workers/ -run XX -bench VectorIndexBuild -benchtime 1x -timeout 1h
func BenchmarkVectorIndexBuild(b *testing.B) {
	n, err := strconv.Atoi(cmp.Or(os.Getenv("MAILFATHOM_BENCH_PASSAGES"), "100000"))
	require.NoError(b, err)
	seed, err := strconv.ParseUint(cmp.Or(os.Getenv("MAILFATHOM_BENCH_SEED"), "1"), 10, 64)
	require.NoError(b, err)
	const dims, perEmail = 384, 10
	ctx := context.Background()
	pool := dbtest.Pool(b)
	gen := vectortest.NewGenerator(1000, 0, dims, seed)
	start := time.Now()
	profile := vectortest.Seed(b, ctx, pool, vectortest.Layout{Emails: n / perEmail, PerEmail: perEmail, Seed: seed, Model: "synthetic"},
		gen.Passage).Profile
	b.Logf("seeded %d passages in %s", n, time.Since(start).Round(time.Second))
	cfg, err := config.Load([]string{"MAILFATHOM_EMBEDDING_PROVIDER_URL=http://127.0.0.1:1", "MAILFATHOM_EMBEDDING_MODEL=synthetic",
		"MAILFATHOM_EMBEDDING_DIMENSIONS=384", "MAILFATHOM_BACKFILL_ENABLED=false"})
	require.NoError(b, err)
	pipelines, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
	require.NoError(b, err)
	embedder, err := embedding.NewClient(embedding.Options{URL: cfg.Embedding.ProviderURL,
		Profile: embedding.Profile{Model: "synthetic", Dimensions: dims}, Registry: pipelines})
	require.NoError(b, err)
	var log logBuffer
	deps, err := workers.NewDependencies(workers.Dependencies{Pool: pool, Config: cfg, Resilience: pipelines, Embedder: embedder, Logger: jsonLogger(&log)})
	require.NoError(b, err)
	ws := river.NewWorkers()
	failures, err := workers.Register(ws, deps)
	require.NoError(b, err)
	client, err := jobqueue.NewClient(jobqueue.Config{Pool: pool, Workers: ws, Logger: jsonLogger(&log),
		Middleware: []rivertype.WorkerMiddleware{failures}, QueueWorkers: map[string]int{jobs.QueueVectorIndex: 1}})
	require.NoError(b, err)
	require.NoError(b, client.Start(ctx))
	b.Cleanup(func() { require.NoError(b, jobqueue.Drain(context.Background(), client, 5*time.Second)) })

	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		_, err := workers.ScheduleVectorIndex(ctx, deps, client)
		require.NoError(b, err)
		built := func() (searchindex.IndexStatus, bool) {
			status, err := searchindex.ReadIndexStatus(ctx, pool, profile)
			require.NoError(b, err)
			checking := false
			for _, j := range dbassert.Jobs(b, pool, "vector_index") {
				generation, _ := j.Arg("generation").(float64)
				checking = checking || (j.State == rivertype.JobStateScheduled && generation == 0)
			}
			return status, status.Serving > 0 && status.Building == 0 && checking
		}
		poll.Every(b, 50*time.Millisecond, 30*time.Minute, "the index serves and its next check is scheduled", func() bool {
			_, done := built()
			return done
		}, func() string {
			status, _ := built()
			return fmt.Sprintf("%+v; %d steps completed", status, dbassert.JobCount(b, pool, "vector_index", rivertype.JobStateCompleted))
		})
		elapsed = time.Since(start)
	}
	// The vacuum after the last step, which searches do not wait for.
	poll.Every(b, 50*time.Millisecond, 10*time.Minute, "the vacuum after the last step logged", func() bool {
		return strings.Contains(log.String(), "vector index generation serving")
	}, func() string { return "logs:\n" + log.String() })
	status, err := searchindex.ReadIndexStatus(ctx, pool, profile)
	require.NoError(b, err)
	require.Zero(b, status.Outside)
	steps := dbassert.JobCount(b, pool, "vector_index", rivertype.JobStateCompleted)
	b.ReportMetric(elapsed.Seconds(), "build-s")
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(status.ServingLists), "lists")
	if training := logDuration(log.String(), "vector index step scheduled", "training"); training > 0 {
		b.ReportMetric(training.Seconds(), "training-s")
	}
	b.ReportMetric(sumDurations(log.String(), "vector index step committed", "duration").Seconds(), "steps-s")
	b.ReportMetric(logDuration(log.String(), "vector index generation serving: every passage is in its lists", "vacuum").Seconds(), "vacuum-s")
	b.Logf("load average at the end: %s", loadAverage())
}

// jsonLogger logs as JSON, at Info and above, into w.
func jsonLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}

// logBuffer holds what is logged: River and the workers log from several
// goroutines while the benchmark reads it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logDuration is the duration attribute attr of the first JSON log line
// whose message is msg, 0 when there is none.
func logDuration(log, msg, attr string) time.Duration {
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != msg {
			continue
		}
		if v, ok := m[attr].(float64); ok {
			return time.Duration(v)
		}
	}
	return 0
}

// sumDurations is the sum of the duration attribute attr of the JSON log
// lines whose message is msg.
func sumDurations(log, msg, attr string) time.Duration {
	var sum time.Duration
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			if v, ok := m[attr].(float64); ok {
				sum += time.Duration(v)
			}
		}
	}
	return sum
}

// loadAverage is the machine's load averages over 1, 5 and 15 minutes.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
