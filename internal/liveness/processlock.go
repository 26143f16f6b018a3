package liveness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mailfathom/mailfathom/internal/failure"
)

// ProcessLock is a process's liveness lock held on a connection of its own
// for the process's whole life, and taken again when that connection is
// lost: a database restart ends every session and with it every advisory
// lock, and a process that did not take its lock again would look dead to
// every later sweep while it keeps working.
//
// The same connection carries the maintenance leadership (Leading): the
// first process to take it keeps it for as long as its connection lives,
// and every other process tries again at each check, so exactly one
// process at a time runs the housekeeping every process could run — and a
// dead leader's successor is in place within one check of the database
// dropping its session.
//
// It does not protect the jobs that were running when the connection was
// lost: their own locks went with their connections, so a sweep may return
// them to River, which is right — each of them fails at its next database
// call anyway and every job is idempotent.
type ProcessLock struct {
	pool     *pgxpool.Pool
	clientID string
	logger   *slog.Logger

	mu      sync.Mutex
	conn    *pgxpool.Conn
	leading bool
	stop    context.CancelFunc
	done    chan struct{}
}

// TakeProcessLock acquires a connection from pool and takes the liveness
// lock of clientID on it. Call it before starting River, then Keep.
func TakeProcessLock(ctx context.Context, pool *pgxpool.Pool, clientID string, logger *slog.Logger) (*ProcessLock, error) {
	l := &ProcessLock{pool: pool, clientID: clientID, logger: logger}
	if err := l.take(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *ProcessLock) take(ctx context.Context) error {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	if err := HoldProcess(ctx, conn, l.clientID); err != nil {
		conn.Release()
		return err
	}
	l.mu.Lock()
	l.conn = conn
	l.leading = false
	l.mu.Unlock()
	l.lead(ctx)
	return nil
}

// lead tries to take the maintenance leadership on the lock's connection.
func (l *ProcessLock) lead(ctx context.Context) {
	l.mu.Lock()
	conn, leading := l.conn, l.leading
	l.mu.Unlock()
	if conn == nil || leading {
		return
	}
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", leaderKey).Scan(&got); err != nil || !got {
		return
	}
	l.mu.Lock()
	l.leading = l.conn == conn
	l.mu.Unlock()
	l.logger.InfoContext(ctx, "this process leads the maintenance: it sweeps work whose process stopped")
}

// Leading reports whether this process holds the maintenance leadership.
func (l *ProcessLock) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Keep checks the lock's connection every interval and, when it is gone,
// takes the lock again on a new one as soon as the database answers. It
// returns at once; Close stops it.
func (l *ProcessLock) Keep(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.check(ctx, interval)
		}
	}()
}

func (l *ProcessLock) check(ctx context.Context, interval time.Duration) {
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn != nil {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		err := conn.Ping(pingCtx)
		cancel()
		if err == nil {
			l.lead(ctx)
			return
		}
		if ctx.Err() != nil {
			return
		}
		l.logger.WarnContext(ctx, "the process liveness lock's database connection was lost; taking the lock again")
		l.mu.Lock()
		l.conn = nil
		l.leading = false
		l.mu.Unlock()
		conn.Release() // a closed connection is destroyed, not returned
	}
	takeCtx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	if err := l.take(takeCtx); err != nil {
		if ctx.Err() == nil {
			l.logger.DebugContext(ctx, "the process liveness lock could not be taken yet", slog.String("error_type", failure.Name(err)))
		}
		return
	}
	l.logger.InfoContext(ctx, "the process liveness lock is held again")
}

// Close stops Keep and releases the connection, which ends the lock.
func (l *ProcessLock) Close() {
	if l.stop != nil {
		l.stop()
		<-l.done
	}
	l.mu.Lock()
	conn := l.conn
	l.conn = nil
	l.leading = false
	l.mu.Unlock()
	if conn != nil {
		// Destroyed rather than returned: a pooled connection would keep
		// the process and leadership locks for whoever took it next.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}
}
