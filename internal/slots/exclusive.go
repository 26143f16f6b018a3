package slots

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Namespaces of the exclusive locks, beside the slot namespaces.
const (
	nsWriteConnection = 0x6d0a
	nsMutation        = 0x6d0b
)

// Conn is the database session a Lock is held on: a *pgxpool.Conn or a
// *pgx.Conn, which the caller keeps until Release.
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Lock is one exclusive session-level advisory lock held on a connection
// the caller keeps until Release. A process that dies loses its
// connection and the lock with it.
type Lock struct {
	conn Conn
	key  int64
}

// AcquireWriteConnection takes the account's write-connection lock: at
// most one write connection per account is open across every process
// sharing the database, because servers count an account's connections.
// It returns ErrFull when another process holds it. The caller keeps conn
// (and the lock) for as long as its write connection is open.
func AcquireWriteConnection(ctx context.Context, conn Conn, account string) (*Lock, error) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(account))
	return tryLock(ctx, conn, int64(uint64(nsWriteConnection)<<48|h.Sum64()&(1<<48-1)))
}

// AcquireMutation takes the lock of one mailbox mutation, so one worker at
// a time carries it, whether a stage job or an account run's convergence
// picked it up. It returns ErrFull when another worker holds it.
func AcquireMutation(ctx context.Context, conn Conn, id [16]byte) (*Lock, error) {
	h := fnv.New64a()
	_, _ = h.Write(id[:])
	return tryLock(ctx, conn, int64(uint64(nsMutation)<<48|h.Sum64()&(1<<48-1)))
}

func tryLock(ctx context.Context, conn Conn, key int64) (*Lock, error) {
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		return nil, fmt.Errorf("slots: try lock: %w", err)
	}
	if !ok {
		return nil, ErrFull
	}
	return &Lock{conn: conn, key: key}, nil
}

// Release gives the lock back. The connection stays the caller's.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.conn == nil {
		return nil
	}
	_, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key)
	l.conn = nil
	if err != nil {
		return fmt.Errorf("slots: release lock: %w", err)
	}
	return nil
}
