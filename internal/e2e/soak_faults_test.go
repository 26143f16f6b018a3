package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
)

// soakFault is one scheduled fault: what to do at a moment of the run.
type soakFault struct {
	at   time.Duration
	name string
	do   func()
}

// faultSchedule draws the run's faults. Each kind lands at least once,
// more often in a longer run; they all land in the first part of the run,
// leaving its last 30 s to mail and reconciliation alone.
func (s *soak) faultSchedule() []soakFault {
	window := s.duration - 30*time.Second
	from := window / 10
	at := func() time.Duration { return s.between(from, window) }
	perRun := func(every time.Duration) int { return max(1, int(s.duration/every)) }
	var faults []soakFault
	add := func(n int, name string, do func(d time.Duration)) {
		for range n {
			t := at()
			faults = append(faults, soakFault{at: t, name: name, do: func() { do(t) }})
		}
	}
	add(perRun(time.Minute), "kill", func(time.Duration) { s.killReplica() })
	add(perRun(5*time.Minute), "dovecot restart", func(time.Duration) { s.restartDovecot() })
	add(perRun(5*time.Minute), "postgres restart", func(time.Duration) { s.restartPostgres() })
	add(perRun(20*time.Second), "cut", func(time.Duration) { s.cut() })
	add(perRun(30*time.Second), "stall", func(time.Duration) { s.stall() })
	add(perRun(3*time.Minute), "provider 500", func(time.Duration) {
		s.providerFault(embedtest.Fault{Kind: embedtest.ServerError}, &s.counts.provider500)
	})
	add(perRun(3*time.Minute), "provider hang", func(time.Duration) {
		s.providerFault(embedtest.Fault{Kind: embedtest.Hang}, &s.counts.providerHangs)
	})
	slices.SortFunc(faults, func(a, b soakFault) int { return int(a.at - b.at) })
	return faults
}

// injectFaults lands the scheduled faults one after another on the test's
// goroutine, then waits out the run's duration. Faults that take time
// (a replica's pause before its restart, a stall, a provider outage) are
// ended in the background, so the schedule keeps its rhythm.
func (s *soak) injectFaults() {
	var pending sync.WaitGroup
	s.pending = &pending
	for _, f := range s.faultSchedule() {
		if d := f.at - s.elapsed(); d > 0 {
			time.Sleep(d)
		}
		s.t.Logf("soak: %v %s", s.elapsed().Round(time.Second), f.name)
		s.event("fault: %s", f.name)
		f.do()
	}
	if d := s.duration - s.elapsed(); d > 0 {
		time.Sleep(d)
	}
	pending.Wait()
	for _, p := range s.proxies {
		p.Heal()
	}
	s.embed.SetFault(embedtest.Fault{})
}

// later runs f after d, in the background, counted in s.pending.
func (s *soak) later(d time.Duration, f func()) {
	s.pending.Add(1)
	go func() {
		defer s.pending.Done()
		time.Sleep(d)
		f()
	}()
}

// killReplica kills serve-a (serve-b stays up for the memory verdict) with
// SIGKILL and starts it again after 1 to 8 s.
func (s *soak) killReplica() {
	s.replicaMu.Lock()
	p := s.replicas[0]
	s.replicaMu.Unlock()
	if p == nil || !p.running() {
		return
	}
	p.kill(s.t)
	s.counts.kills.Add(1)
	s.later(s.between(time.Second, 8*time.Second), func() {
		np := s.startReplica("serve-a")
		s.replicaMu.Lock()
		s.replicas[0] = np
		s.replicaMu.Unlock()
	})
}

// restartDovecot stops Dovecot and starts it again on the same ports.
func (s *soak) restartDovecot() {
	s.b.server.Restart()
	s.counts.dovecotRestarts.Add(1)
}

// restartPostgres stops the cluster for 1 to 4 s and starts it again on
// the same port.
func (s *soak) restartPostgres() {
	ctx := context.Background()
	s.b.pool.Reset()
	require.NoError(s.t, s.cluster.Stop(ctx))
	time.Sleep(s.between(time.Second, 4*time.Second))
	var err error
	s.cluster, err = pgcluster.Start(ctx, s.pgOpts)
	require.NoError(s.t, err)
	s.counts.pgRestarts.Add(1)
}

// cut closes every IMAP connection of a random account.
func (s *soak) cut() {
	s.proxies[s.intn(len(s.proxies))].CutAll()
	s.counts.cuts.Add(1)
}

// stall freezes every IMAP connection of a random account, and those it
// opens meanwhile, for 2 to 25 s: longer than the retrieval attempt
// timeout sometimes, shorter mostly.
func (s *soak) stall() {
	p := s.proxies[s.intn(len(s.proxies))]
	p.StallAll()
	s.counts.stalls.Add(1)
	s.later(s.between(2*time.Second, 25*time.Second), p.Resume)
}

// providerFault makes the embedding provider misbehave as f for 5 to 20 s.
func (s *soak) providerFault(f embedtest.Fault, n interface{ Add(int64) int64 }) {
	s.embed.SetFault(f)
	n.Add(1)
	s.later(s.between(5*time.Second, 20*time.Second), func() { s.embed.SetFault(embedtest.Fault{}) })
}

// boundSamples are the largest connection counts the sampler saw.
type boundSamples struct {
	samples int
	// imap is the most IMAP connections of each account, both replicas
	// together; pg the most PostgreSQL connections of either replica.
	imap map[string]int
	pg   int
}

func (b boundSamples) String() string {
	return fmt.Sprintf("%d samples; most IMAP connections per account %v; most PostgreSQL connections of one replica %d", b.samples, b.imap, b.pg)
}

// sampleBounds counts, every 100 ms until ctx ends, each running replica's
// connections to each account's proxy and to PostgreSQL, and returns a
// function that stops it and returns the largest counts.
func (s *soak) sampleBounds(ctx context.Context) func() boundSamples {
	ctx, cancel := context.WithCancel(ctx)
	out := boundSamples{imap: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			per := map[string]int{}
			s.replicaMu.Lock()
			procs := s.replicas
			s.replicaMu.Unlock()
			for _, p := range procs {
				if p == nil || !p.running() {
					continue
				}
				for i, port := range s.proxyPorts {
					if n, err := tcpConnections(p.pid(), port); err == nil {
						per[s.accounts[i].id] += n
					}
				}
				if n, err := tcpConnections(p.pid(), s.pgOpts.Port); err == nil {
					out.pg = max(out.pg, n)
				}
			}
			for k, n := range per {
				out.imap[k] = max(out.imap[k], n)
			}
			out.samples++
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	return func() boundSamples {
		cancel()
		<-done
		return out
	}
}

// tcpConnections counts the established TCP connections of process pid to
// port on the loopback, from /proc/<pid>/net/tcp and the process's socket
// descriptors. A process that ended meanwhile is an error.
func tcpConnections(pid, port int) (int, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0, err
	}
	remote := fmt.Sprintf(":%04X", port)
	n := 0
	for _, l := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 9 && strings.HasSuffix(f[2], remote) && f[3] == "01" && inodes[f[9]] {
			n++
		}
	}
	return n, nil
}

// memorySample is serve-b's memory at one moment of the run.
type memorySample struct {
	at                   time.Duration
	rss, heapInuse, heap int64
	goroutines           int64
}

func (m memorySample) String() string {
	return fmt.Sprintf("%v rss %d MiB heap in use %d MiB heap from the OS %d MiB goroutines %d",
		m.at.Round(time.Second), m.rss>>20, m.heapInuse>>20, m.heap>>20, m.goroutines)
}

// sampleMemory reads serve-b's resident set and, from its /metrics, the Go
// runtime's heap and goroutine counts every 10 s until ctx ends, and
// returns a function that stops it and returns the samples: what the
// memory verdict prints, so growth reads as a trend.
func (s *soak) sampleMemory(ctx context.Context) func() []memorySample {
	ctx, cancel := context.WithCancel(ctx)
	var out []memorySample
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if p := s.replicas[1]; p != nil && p.running() {
				m := memorySample{at: s.elapsed()}
				m.rss, _ = residentSet(p.pid())
				if addr, ok := addrOf(p); ok {
					if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						for _, line := range strings.Split(string(body), "\n") {
							var v float64
							switch {
							case strings.HasPrefix(line, "go_memstats_heap_inuse_bytes "):
								fmt.Sscanf(strings.TrimPrefix(line, "go_memstats_heap_inuse_bytes "), "%g", &v)
								m.heapInuse = int64(v)
							case strings.HasPrefix(line, "go_memstats_heap_sys_bytes "):
								fmt.Sscanf(strings.TrimPrefix(line, "go_memstats_heap_sys_bytes "), "%g", &v)
								m.heap = int64(v)
							case strings.HasPrefix(line, "go_goroutines "):
								fmt.Sscanf(strings.TrimPrefix(line, "go_goroutines "), "%g", &v)
								m.goroutines = int64(v)
							}
						}
					}
				}
				out = append(out, m)
			}
			sleepCtx(ctx, 10*time.Second)
		}
	}()
	return func() []memorySample {
		cancel()
		<-done
		return out
	}
}
