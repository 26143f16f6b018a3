package mutation_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

func TestConnections(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		conns  *mutation.Connections
		opened *atomic.Int32
		lockOf func(ctx context.Context) error // tries the account's write-connection lock from another session
		proxy  *faultproxy.Proxy               // between the connections and Dovecot
		pool   *pgxpool.Pool
	}
	setup := func(t *testing.T, idle time.Duration) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		srv := dovecot.Start(t)
		user := srv.NewUser()
		proxy := faultproxy.Start(t, srv.TLSAddr())
		host, portText, err := net.SplitHostPort(proxy.Addr())
		require.NoError(t, err)
		port, err := strconv.Atoi(portText)
		require.NoError(t, err)
		ep := imapx.Endpoint{AccountID: "acct", Host: host, Port: port, Security: imapx.TLSOnConnect, TLSConfig: srv.TLSConfig(),
			Username: user.Name(), Password: func(context.Context) ([]byte, error) { return []byte(user.Password()), nil }}
		cfg, err := config.Load(nil)
		require.NoError(t, err)
		reg, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
		require.NoError(t, err)
		pool := dbtest.Pool(t)
		var opened atomic.Int32
		conns, err := mutation.NewConnections(mutation.ConnectionsConfig{
			Pool: pool, Registry: reg, IdlePeriod: idle,
			Open: func(ctx context.Context, _ string) (*imapx.WriteConnection, error) {
				opened.Add(1)
				return imapx.OpenWriteConnection(ctx, ep, imapx.SessionOptions{})
			},
		})
		require.NoError(t, err)
		t.Cleanup(conns.Close)
		lockOf := func(ctx context.Context) error {
			c, err := pool.Acquire(ctx)
			require.NoError(t, err)
			defer c.Release()
			l, err := slots.AcquireWriteConnection(ctx, c, "acct")
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
		return ctx, &testBundle{conns: conns, opened: &opened, lockOf: lockOf, proxy: proxy, pool: pool}
	}
	use := func(ctx context.Context, t *testing.T, b *testBundle) {
		t.Helper()
		require.NoError(t, b.conns.Use(ctx, "acct", func(s *mutation.Session) error {
			return s.Command(ctx, "INBOX", func(context.Context, *imapx.WriteConnection, uint32) error { return nil })
		}))
	}

	t.Run("OneConnectionForABurstOfChanges", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, time.Minute)
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = b.conns.Use(ctx, "acct", func(s *mutation.Session) error {
					return s.Command(ctx, "INBOX", func(context.Context, *imapx.WriteConnection, uint32) error { return nil })
				})
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, b.opened.Load(), "a second change waits for the connection rather than opening another")
		require.ErrorIs(t, b.lockOf(ctx), slots.ErrFull, "another process cannot open one for the account meanwhile")
	})

	t.Run("ClosedAfterTheIdlePeriod", func(t *testing.T) {
		t.Parallel()
		// Long enough that the slot is still held when the next line looks
		// on a loaded machine; the connection closes once it has passed.
		ctx, b := setup(t, 2*time.Second)
		use(ctx, t, b)
		require.ErrorIs(t, b.lockOf(ctx), slots.ErrFull)
		poll.Until(t, 10*time.Second, "the slot is given back once the connection was idle for the period", func() (bool, string) {
			err := b.lockOf(ctx)
			return err == nil, fmt.Sprintf("taking the slot: %v", err)
		})
		use(ctx, t, b)
		require.EqualValues(t, 2, b.opened.Load(), "the next change pays for a fresh connection")
	})
	t.Run("ClosedWhenItsLockIsLost", func(t *testing.T) {
		t.Parallel()
		// An idle period far past the test: only the lost lock closes it.
		ctx, b := setup(t, time.Hour)
		use(ctx, t, b)
		require.Equal(t, 1, b.proxy.Stats().Active)
		require.ErrorIs(t, b.lockOf(ctx), slots.ErrFull)

		// The session holding the lock ends, as it does when PostgreSQL
		// restarts: another process may now take the lock, so the
		// connection it guarded must not stay open.
		require.Positive(t, dbassert.EndAdvisoryLockHolders(t, b.pool))
		poll.Until(t, 10*time.Second, "the idle connection closes once its lock is lost", func() (bool, string) {
			active := b.proxy.Stats().Active
			return active == 0, fmt.Sprintf("%d connections open", active)
		})
		require.NoError(t, b.lockOf(ctx))

		use(ctx, t, b)
		require.EqualValues(t, 2, b.opened.Load(), "the next change opens a connection under a lock taken afresh")
		require.ErrorIs(t, b.lockOf(ctx), slots.ErrFull)
		require.Equal(t, 1, b.proxy.Stats().Active)
	})
}
