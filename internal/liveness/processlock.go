package liveness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ProcessLock is a process's liveness lock held on a connection of its own
// for the process's whole life, and taken again when that connection is
// lost: a database restart ends every session and with it every advisory
// lock, and a process that did not take its lock again would look dead to
// every later sweep while it keeps working.
//
// It does not protect the jobs that were running when the connection was
// lost: their own locks went with their connections, so a sweep may return
// them to River, which is right — each of them fails at its next database
// call anyway and every job is idempotent.
type ProcessLock struct {
	pool     *pgxpool.Pool
	clientID string
	logger   *slog.Logger

	mu   sync.Mutex
	conn *pgxpool.Conn
	stop context.CancelFunc
	done chan struct{}
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
	l.mu.Unlock()
	return nil
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
		if err == nil || ctx.Err() != nil {
			return
		}
		l.logger.WarnContext(ctx, "the process liveness lock's database connection was lost; taking the lock again")
		l.mu.Lock()
		l.conn = nil
		l.mu.Unlock()
		conn.Release() // a closed connection is destroyed, not returned
	}
	takeCtx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	if err := l.take(takeCtx); err != nil {
		if ctx.Err() == nil {
			l.logger.DebugContext(ctx, "the process liveness lock could not be taken yet", slog.String("error_type", fmt.Sprintf("%T", err)))
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
	l.mu.Unlock()
	if conn != nil {
		conn.Release()
	}
}
