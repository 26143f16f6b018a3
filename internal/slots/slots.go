// Package slots enforces synchronization's two concurrency bounds —
// MaxConcurrentAccounts and MaxConcurrentFoldersPerAccount — across every
// process sharing one PostgreSQL database.
//
// River's open-source edition has no per-key concurrency limits, so the
// bounds are PostgreSQL session-level advisory locks held on the connection
// the work unit uses for its whole duration. A process that dies loses its
// connection and with it every slot it held, so nothing has to be cleaned
// up after a crash.
//
// An account occupies one of MaxConcurrentAccounts account slots while any
// of its work units runs, and the work units of one account share that
// slot: each holds it as a shared lock, beside a shared membership lock
// naming the account. Which slot an account already occupies is read from
// pg_locks (the backends holding its membership lock hold its slot), under
// a transaction-level mutex so two claimers never pick the same free slot.
// Each work unit also takes one of its account's
// MaxConcurrentFoldersPerAccount folder slots exclusively, and a unit that
// works on one folder alias (a forward pass, a reconciliation window) the
// alias's own lock exclusively, so a pass and a window of one alias never
// overlap whatever the folder bound: a message stored and expunged while
// both ran could otherwise be covered by a modification sequence the
// window recorded and never be reported gone.
//
// Acquire never waits: a full bound is ErrFull, which a worker turns into a
// short River snooze. Within one process a Gate comes first: a unit waits
// there, without touching PostgreSQL, until a unit of the same process
// leaves, so a process with many accounts due does not spend itself and
// the database retrying slots that are taken.
package slots

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mailfathom/mailfathom/internal/failure"
)

// ErrFull reports that a bound is reached; try again later.
var ErrFull = failure.New("ConcurrencyBoundReached", "slots: concurrency bound reached")

// Lock namespaces, in the high byte of each 64-bit advisory key, so the
// keys of one kind never collide with another's. 0x6d is 'm' (MailFathom).
const (
	nsMutex  = 0x6d01
	nsSlot   = 0x6d02
	nsMember = 0x6d03
	nsFolder = 0x6d04
	nsAlias  = 0x6d09
)

func key(ns uint16, hash uint32, n uint16) int64 {
	return int64(uint64(ns)<<48 | uint64(hash)<<16 | uint64(n))
}

func accountHash(account string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(account))
	return h.Sum32()
}

// Bounds are the two limits.
type Bounds struct {
	// MaxAccounts is MaxConcurrentAccounts.
	MaxAccounts int
	// MaxFoldersPerAccount is MaxConcurrentFoldersPerAccount.
	MaxFoldersPerAccount int
}

// Held is the slots one work unit holds on its connection.
type Held struct {
	conn      *pgxpool.Conn
	keys      []int64 // shared locks
	exclusive []int64 // the folder slot, and the alias's lock when taken
	// alias is the alias lock TakeAlias took, 0 for none.
	alias int64
}

func aliasKey(account, alias string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(account))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(alias))
	return int64(uint64(nsAlias)<<48 | h.Sum64()&(1<<48-1))
}

// Acquire takes an account slot for account (shared with the account's
// other running work units), one of the account's folder slots and, when
// alias is not empty, the alias's own lock, on conn, which the caller keeps
// until Release. It returns ErrFull when a bound is reached or another
// unit works on the alias.
func Acquire(ctx context.Context, conn *pgxpool.Conn, account, alias string, b Bounds) (*Held, error) {
	if b.MaxAccounts < 1 || b.MaxFoldersPerAccount < 1 || b.MaxAccounts > 1<<16 || b.MaxFoldersPerAccount > 1<<16 {
		return nil, fmt.Errorf("slots: bounds out of range")
	}
	h := accountHash(account)
	member := key(nsMember, h, 0)

	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("slots: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key(nsMutex, 0, 0)); err != nil {
		return nil, fmt.Errorf("slots: take the slot mutex: %w", err)
	}

	slot, err := occupiedSlot(ctx, tx, member)
	if err != nil {
		return nil, err
	}
	if slot < 0 {
		if slot, err = freeSlot(ctx, tx, b.MaxAccounts); err != nil {
			return nil, err
		}
		if slot < 0 {
			return nil, ErrFull
		}
	}
	slotKey := key(nsSlot, 0, uint16(slot))

	var exclusive []int64
	unlock := func() {
		for _, k := range exclusive {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", k)
		}
	}
	if alias != "" {
		k := aliasKey(account, alias)
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil {
			return nil, fmt.Errorf("slots: try the alias lock: %w", err)
		}
		if !ok {
			return nil, ErrFull
		}
		exclusive = append(exclusive, k)
	}
	var folder int64
	for j := range b.MaxFoldersPerAccount {
		k := key(nsFolder, h, uint16(j))
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil {
			unlock()
			return nil, fmt.Errorf("slots: try folder slot: %w", err)
		}
		if ok {
			folder = k
			break
		}
	}
	if folder == 0 {
		unlock()
		return nil, ErrFull
	}
	exclusive = append(exclusive, folder)
	// Session-level locks survive the commit; the mutex does not.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_lock_shared($1), pg_advisory_lock_shared($2)", slotKey, member); err != nil {
		unlock()
		return nil, fmt.Errorf("slots: take account slot: %w", err)
	}
	held := &Held{conn: conn, keys: []int64{slotKey, member}, exclusive: exclusive}
	if err := tx.Commit(ctx); err != nil {
		// The session locks are still held on conn; release them.
		return nil, errors.Join(fmt.Errorf("slots: commit: %w", err), held.Release(context.WithoutCancel(ctx)))
	}
	return held, nil
}

// occupiedSlot returns the account slot other backends of this account
// hold, or -1.
func occupiedSlot(ctx context.Context, tx pgx.Tx, member int64) (int, error) {
	var slot int
	err := tx.QueryRow(ctx, `
		SELECT (s.objid::bigint & 65535)::int
		FROM pg_locks m
		JOIN pg_locks s ON s.pid = m.pid AND s.locktype = 'advisory' AND s.granted AND s.objsubid = 1
		 AND s.database = m.database AND (s.classid::bigint >> 16) = $2
		WHERE m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
		  AND m.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((m.classid::bigint << 32) | m.objid::bigint) = $1
		LIMIT 1`, member, nsSlot).Scan(&slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("slots: read occupied slot: %w", err)
	}
	return slot, nil
}

// freeSlot returns the lowest account slot nobody holds, or -1.
func freeSlot(ctx context.Context, tx pgx.Tx, maxAccounts int) (int, error) {
	var slot int
	err := tx.QueryRow(ctx, `
		SELECT n FROM generate_series(0, $1 - 1) AS n
		WHERE NOT EXISTS (
			SELECT 1 FROM pg_locks l
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND ((l.classid::bigint << 32) | l.objid::bigint) = ($2::bigint << 48) | n)
		ORDER BY n LIMIT 1`, maxAccounts, nsSlot).Scan(&slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("slots: find a free slot: %w", err)
	}
	return slot, nil
}

// Release gives the slots back. The connection stays the caller's.
func (h *Held) Release(ctx context.Context) error {
	if h == nil || h.conn == nil {
		return nil
	}
	_, err := h.conn.Exec(ctx, "SELECT pg_advisory_unlock_shared($1), pg_advisory_unlock_shared($2), (SELECT count(pg_advisory_unlock(k)) FROM unnest($3::bigint[]) k)",
		h.keys[0], h.keys[1], h.exclusive)
	h.conn = nil
	if err != nil {
		return fmt.Errorf("slots: release: %w", err)
	}
	return nil
}

// TakeAlias takes alias's own lock of account for a unit that holds h
// without one — an account run going on to a folder's pass over the
// session it listed with — so the pass needs no other slot. It returns
// ErrFull when another unit works on the alias, and fails when h already
// holds an alias. DropAlias gives it back; Release does too.
func (h *Held) TakeAlias(ctx context.Context, account, alias string) error {
	if h == nil || h.conn == nil {
		return errors.New("slots: take an alias: nothing held")
	}
	if h.alias != 0 {
		return errors.New("slots: take an alias: one is held already")
	}
	k := aliasKey(account, alias)
	var ok bool
	if err := h.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil {
		return fmt.Errorf("slots: try the alias lock: %w", err)
	}
	if !ok {
		return ErrFull
	}
	h.alias = k
	h.exclusive = append(h.exclusive, k)
	return nil
}

// DropAlias gives back the alias lock TakeAlias took; the account and
// folder slots stay held.
func (h *Held) DropAlias(ctx context.Context) error {
	if h == nil || h.conn == nil || h.alias == 0 {
		return nil
	}
	k := h.alias
	h.alias = 0
	h.exclusive = slices.DeleteFunc(h.exclusive, func(e int64) bool { return e == k })
	if _, err := h.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", k); err != nil {
		return fmt.Errorf("slots: release the alias lock: %w", err)
	}
	return nil
}
