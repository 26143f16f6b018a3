package serverproc

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// PortAttempts is how often a first start tries new ports when the server
// could not bind the ones picked.
const PortAttempts = 5

// Supervisor keeps one server's process across its starts, stops and
// restarts: it retries a start whose port another process took, and it
// counts the runs, so that a harness tells a session opened in an earlier
// run from one of the current run. The zero value is a stopped server.
// Its methods may be called from any goroutine.
type Supervisor struct {
	mu      sync.Mutex
	proc    *Process
	run     uint64
	startup time.Duration
}

// Start starts the server with launch, which picks the ports when it
// should, writes the configuration and starts the process with Start.
// With newPorts, a first start, it calls launch up to PortAttempts times
// while launch fails with an error from PortTaken, launch picking new
// ports each time; without, a restart on the ports of the last run, it
// calls launch once. It returns launch's last error.
//
// Precondition: the server is stopped (a new Supervisor, or after Stop).
func (s *Supervisor) Start(newPorts bool, launch func() (*Process, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	attempts := 1
	if newPorts {
		attempts = PortAttempts
	}
	var err error
	for range attempts {
		var proc *Process
		if proc, err = launch(); err == nil {
			s.proc = proc
			s.run++
			s.startup = proc.startup
			return nil
		}
		if !errors.As(err, new(portTaken)) {
			return err
		}
	}
	return fmt.Errorf("could not bind free ports in %d attempts: %w", attempts, err)
}

// Stop stops the server if it runs.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Stop()
		s.proc = nil
	}
}

// Run returns the number of the current run, counting from 1, and whether
// the server runs. It waits while a start is under way.
func (s *Supervisor) Run() (run uint64, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.proc != nil
}

// StartupTime returns how long the last start took, from exec until ready
// said the server serves.
func (s *Supervisor) StartupTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startup
}

// PortTaken marks err, from a launch, as a failure to bind a port that
// another process took between FreeAddrs and the bind, on which Start
// tries again. err's text and chain stay as they are.
func PortTaken(err error) error { return portTaken{err} }

type portTaken struct{ error }

func (e portTaken) Unwrap() error { return e.error }
