package serverproc

import "sync"

// Shared is the one server a whole test binary shares, started on first
// use. The zero value holds none.
type Shared[T any] struct {
	mu      sync.Mutex
	in      T
	started bool
	err     error
}

// Get returns the shared server, starting it with start on the first call
// and on the first call after Stop. If that start failed, Get returns its
// error, without starting again, until Stop.
func (s *Shared[T]) Get(start func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started && s.err == nil {
		in, err := start()
		if err != nil {
			s.err = err
		} else {
			s.in, s.started = in, true
		}
	}
	return s.in, s.err
}

// Stop ends the shared server with stop, if one was started, and forgets
// it and any failed start, so that the next Get starts a new one.
func (s *Shared[T]) Stop(stop func(T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		stop(s.in)
	}
	var zero T
	s.in, s.started, s.err = zero, false, nil
}
