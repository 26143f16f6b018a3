package mutation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/slots"
)

// ConnectionsConfig configures Connections.
type ConnectionsConfig struct {
	// Pool holds the write-connection locks. Required.
	Pool *pgxpool.Pool
	// Registry runs establishment and commands under the account's
	// pipelines. Required.
	Registry *resilience.Registry
	// Open opens a connection: the mailbox layer's write opener, which
	// only the mutation path is given. Required.
	Open mailsession.WriteOpener
	// IdlePeriod is WriteConnectionIdlePeriod: how long a connection is
	// kept after its last change. Default 2 min.
	IdlePeriod time.Duration
	// LockCheckPeriod is how often an idle connection's lock is checked,
	// with one round trip to the database. Default 1 s.
	LockCheckPeriod time.Duration
	// Logger receives account ids and durations only. Default: discard.
	Logger *slog.Logger
}

// Connections holds each account's one write connection, as a
// mailsession.WriteSession: the session opens, checks and replaces the
// connection under the account's pipelines; Connections decides when an
// account may hold one. It opens it on the first change, keeps it for
// IdlePeriod after the last, and closes it then. A second change of the
// same account waits for the first rather than opening a second
// connection, and another process holding the account's connection is
// slots.ErrFull, a deferral. A connection the server closed meanwhile is
// replaced by the session under the same lock, so it is still one
// connection per account.
//
// The lock lives as long as its database session. When that session ends
// — PostgreSQL restarted, or an administrator ended it — another process
// may take the lock, so the connection it guarded is closed: at once when
// it is idle (checked every LockCheckPeriod), and before the next change
// otherwise. A change in flight at that moment is not interrupted; its own
// database work fails with the same restart.
type Connections struct {
	cfg ConnectionsConfig

	mu       sync.Mutex
	accounts map[string]*accountConn
	closed   bool
	stop     chan struct{}
	watching sync.WaitGroup
}

// accountConn is one account's connection and its lock. sem admits one
// user at a time and is what a second change waits on.
type accountConn struct {
	sem   chan struct{}
	ws    *mailsession.WriteSession
	db    *pgx.Conn
	lock  *slots.Lock
	timer *time.Timer
}

// NewConnections validates cfg and fills its defaults.
func NewConnections(cfg ConnectionsConfig) (*Connections, error) {
	if cfg.Pool == nil || cfg.Registry == nil || cfg.Open == nil {
		return nil, errors.New("mutation: connections need a pool, a registry and an opener")
	}
	if cfg.IdlePeriod <= 0 {
		cfg.IdlePeriod = 2 * time.Minute
	}
	if cfg.LockCheckPeriod <= 0 {
		cfg.LockCheckPeriod = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Connections{cfg: cfg, accounts: map[string]*accountConn{}, stop: make(chan struct{})}
	c.watching.Add(1)
	go c.watchLocks()
	return c, nil
}

// lockCheckTimeout bounds one check of a lock's database session: a
// session that does not answer within it is taken for ended.
const lockCheckTimeout = 2 * time.Second

// watchLocks closes every idle connection whose lock was lost with its
// database session, each LockCheckPeriod until Close.
func (c *Connections) watchLocks() {
	defer c.watching.Done()
	tick := time.NewTicker(c.cfg.LockCheckPeriod)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		accounts := make(map[string]*accountConn, len(c.accounts))
		for k, a := range c.accounts {
			accounts[k] = a
		}
		c.mu.Unlock()
		for account, a := range accounts {
			select {
			case a.sem <- struct{}{}:
			default:
				continue // in use: Use checks before the next change
			}
			c.dropIfLockLost(account, a)
			<-a.sem
		}
	}
}

// dropIfLockLost closes a's connection when the database session its lock
// was held on has ended. The caller holds a.sem.
func (c *Connections) dropIfLockLost(account string, a *accountConn) {
	if a.lock == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockCheckTimeout)
	defer cancel()
	if a.db.Ping(ctx) == nil {
		return
	}
	c.release(a)
	c.cfg.Logger.Warn("write connection closed: the database session holding its lock ended", slog.String("account", account))
}

func (c *Connections) entry(account string) (*accountConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("mutation: the write connections are closed")
	}
	a := c.accounts[account]
	if a == nil {
		a = &accountConn{sem: make(chan struct{}, 1)}
		c.accounts[account] = a
	}
	return a, nil
}

// Session is the account's write connection lent to one caller of Use.
type Session struct {
	ws *mailsession.WriteSession
}

// Use lends the account's write connection to fn, opening it (and taking
// the account's write-connection lock) when none is open. It waits while
// another change of this process uses it, and returns slots.ErrFull when
// another process holds the account's connection.
func (c *Connections) Use(ctx context.Context, account string, fn func(s *Session) error) error {
	a, err := c.entry(account)
	if err != nil {
		return err
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	defer func() {
		a.timer = time.AfterFunc(c.cfg.IdlePeriod, func() { c.closeIdle(account, a) })
		<-a.sem
	}()
	c.dropIfLockLost(account, a)
	if a.lock == nil {
		// A session of its own rather than one of the pool's: it lives as
		// long as the write connection, and closing the pool must not
		// wait for it.
		db, err := pgx.ConnectConfig(ctx, c.cfg.Pool.Config().ConnConfig.Copy())
		if err != nil {
			return fmt.Errorf("mutation: connect for the write-connection lock: %w", err)
		}
		lock, err := slots.AcquireWriteConnection(ctx, db, account)
		if err != nil {
			_ = db.Close(context.WithoutCancel(ctx))
			return err
		}
		a.db, a.lock = db, lock
	}
	if a.ws == nil {
		ws, err := mailsession.NewWriteSession(mailsession.WriteSessionConfig{
			Registry: c.cfg.Registry, Account: account, Open: c.cfg.Open, Logger: c.cfg.Logger,
		})
		if err != nil {
			return err
		}
		a.ws = ws
	}
	return fn(&Session{ws: a.ws})
}

// Command runs fn on the account's write connection after selecting path
// (read-write) on it, under the account's MailboxDataRetrieval pipeline
// (mailsession.WriteSession.Command): each attempt runs on a connection
// that was checked first, and an attempt after a failed one on a fresh
// connection. fn gets the folder's UIDVALIDITY. A fn that issues a MOVE or
// COPY must not issue it again in a later attempt once its bytes were
// written (see Stages.place), which the pipeline cannot know.
func (s *Session) Command(ctx context.Context, path string, fn func(ctx context.Context, w *imapx.WriteConnection, uidValidity uint32) error) error {
	return s.ws.Command(ctx, path, fn)
}

// closeIdle closes the account's connection when nobody used it for the
// idle period. A user that holds it now restarts the timer when done.
func (c *Connections) closeIdle(account string, a *accountConn) {
	select {
	case a.sem <- struct{}{}:
	default:
		return
	}
	defer func() { <-a.sem }()
	c.release(a)
	c.cfg.Logger.Debug("write connection closed after its idle period", slog.String("account", account))
}

// release closes a's connection and gives its lock back. The caller holds
// a.sem.
func (c *Connections) release(a *accountConn) {
	if a.ws != nil {
		_ = a.ws.Close()
	}
	if a.lock != nil {
		_ = a.lock.Release(context.Background())
		a.lock = nil
	}
	if a.db != nil {
		_ = a.db.Close(context.Background())
		a.db = nil
	}
}

// Close closes every account's connection, waiting for a change in flight
// to end, and refuses later use.
func (c *Connections) Close() {
	c.mu.Lock()
	if !c.closed {
		close(c.stop)
	}
	c.closed = true
	accounts := c.accounts
	c.accounts = map[string]*accountConn{}
	c.mu.Unlock()
	for _, a := range accounts {
		a.sem <- struct{}{}
		if a.timer != nil {
			a.timer.Stop()
		}
		c.release(a)
		<-a.sem
	}
	c.watching.Wait()
}
