package slots_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/slots"
)

func TestGate(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		gate *slots.Gate
		stop chan struct{}
	}

	setup := func(t *testing.T, b slots.Bounds) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		gate, err := slots.NewGate(b)
		require.NoError(t, err)
		return ctx, &testBundle{gate: gate, stop: make(chan struct{})}
	}

	// enter is a unit entering the gate in the background; its result
	// arrives on the returned channel.
	type entered struct {
		leave func()
		err   error
	}
	enter := func(ctx context.Context, b *testBundle, account, alias string, patience time.Duration) <-chan entered {
		done := make(chan entered, 1)
		go func() {
			leave, err := b.gate.Enter(ctx, account, alias, patience, b.stop)
			done <- entered{leave, err}
		}()
		return done
	}
	const long = time.Minute

	// bubble runs a subtest in a synctest bubble: time is the bubble's
	// own, and synctest.Wait returns once every unit entering in the
	// background is blocked in the gate, so no test guesses how long
	// a goroutine takes to reach it.
	bubble := func(t *testing.T, name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, f)
		})
	}

	t.Run("OutOfRange", func(t *testing.T) {
		t.Parallel()
		_, err := slots.NewGate(slots.Bounds{MaxAccounts: 0, MaxFoldersPerAccount: 1})
		require.Error(t, err)
		_, err = slots.NewGate(slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 0})
		require.Error(t, err)
	})

	bubble(t, "AccountBoundWaitsForALeave", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 2, MaxFoldersPerAccount: 1})
		leaveA, err := b.gate.Enter(ctx, "a", "", long, b.stop)
		require.NoError(t, err)
		_, err = b.gate.Enter(ctx, "b", "", long, b.stop)
		require.NoError(t, err)

		c := enter(ctx, b, "c", "", long)
		synctest.Wait()
		select {
		case <-c:
			t.Fatal("a third account entered with two slots taken")
		default:
		}
		leaveA()
		leaveA() // a second call does nothing
		got := <-c
		require.NoError(t, got.err)

		// Both slots are taken again: b and c.
		_, err = b.gate.Enter(ctx, "d", "", 20*time.Millisecond, b.stop)
		require.ErrorIs(t, err, slots.ErrFull)
	})

	bubble(t, "WaitingNamesTheAccountsWithAUnitWaiting", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 2, MaxFoldersPerAccount: 1})
		leave, err := b.gate.Enter(ctx, "a", "INBOX", long, b.stop)
		require.NoError(t, err)
		require.False(t, b.gate.Waiting("a"), "nothing waits")
		sent := enter(ctx, b, "a", "Sent", long)
		synctest.Wait()
		require.True(t, b.gate.Waiting("a"), "the account's other folder waits")
		require.False(t, b.gate.Waiting("b"))
		leave()
		got := <-sent
		require.NoError(t, got.err)
		require.False(t, b.gate.Waiting("a"), "it entered")
	})

	bubble(t, "FolderBoundAndAliasOfOneAccount", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 2})
		leave, err := b.gate.Enter(ctx, "a", "INBOX", long, b.stop)
		require.NoError(t, err)
		// The same alias waits whatever the folder bound.
		_, err = b.gate.Enter(ctx, "a", "INBOX", 20*time.Millisecond, b.stop)
		require.ErrorIs(t, err, slots.ErrFull)
		// Another alias of the account shares its slot.
		_, err = b.gate.Enter(ctx, "a", "Sent", long, b.stop)
		require.NoError(t, err)
		// The account's two folder slots are taken.
		_, err = b.gate.Enter(ctx, "a", "Archive", 20*time.Millisecond, b.stop)
		require.ErrorIs(t, err, slots.ErrFull)
		leave()
		_, err = b.gate.Enter(ctx, "a", "INBOX", 20*time.Millisecond, b.stop)
		require.NoError(t, err)
	})

	bubble(t, "FolderUnitBeforeAccountRun", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 1})
		leave, err := b.gate.Enter(ctx, "a", "", long, b.stop)
		require.NoError(t, err)

		// An account run waits first, a folder pass of another account
		// second: the pass gets the slot.
		run := enter(ctx, b, "b", "", long)
		synctest.Wait()
		pass := enter(ctx, b, "c", "INBOX", long)
		synctest.Wait()
		leave()
		got := <-pass
		require.NoError(t, got.err)
		synctest.Wait()
		select {
		case <-run:
			t.Fatal("the account run entered while the folder pass held the only slot")
		default:
		}
		got.leave()
		got = <-run
		require.NoError(t, got.err)
	})

	bubble(t, "BlockedFolderUnitDoesNotHoldBackOtherAccounts", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 2, MaxFoldersPerAccount: 1})
		_, err := b.gate.Enter(ctx, "a", "INBOX", long, b.stop)
		require.NoError(t, err)
		// A window of a's alias waits for a's folder slot, not for an
		// account slot: b's run goes in.
		window := enter(ctx, b, "a", "INBOX", long)
		synctest.Wait()
		_, err = b.gate.Enter(ctx, "b", "", 20*time.Millisecond, b.stop)
		require.NoError(t, err)
		synctest.Wait()
		select {
		case <-window:
			t.Fatal("a second unit of a's alias entered")
		default:
		}
	})

	bubble(t, "StopAndContext", func(t *testing.T) {
		ctx, b := setup(t, slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 1})
		_, err := b.gate.Enter(ctx, "a", "", long, b.stop)
		require.NoError(t, err)

		stopped := enter(ctx, b, "b", "", long)
		close(b.stop)
		require.ErrorIs(t, (<-stopped).err, slots.ErrFull)

		cctx, cancel := context.WithCancel(ctx)
		cancelled := enter(cctx, &testBundle{gate: b.gate}, "c", "", long)
		cancel()
		require.ErrorIs(t, (<-cancelled).err, context.Canceled)
	})
}
