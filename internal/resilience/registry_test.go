package resilience_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

var (
	accountA  = resilience.Key{Class: resilience.MailboxDataRetrieval, Instance: "account-a"}
	accountB  = resilience.Key{Class: resilience.MailboxDataRetrieval, Instance: "account-b"}
	establish = resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: "account-a"}
	database  = resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}
	provider  = resilience.Key{Class: resilience.AiProviderInvocation, Instance: "embeddings"}
)

func TestExecute(t *testing.T) {
	t.Parallel()

	t.Run("SucceedsOnTheFirstCall", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			require.Equal(t, 1, resilience.Attempt(ctx))
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 1, calls.get())
	})

	t.Run("MaxAttemptsCountsTheFirstCallAndExhaustionRethrowsTheLastFailure", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.MaxAttempts = 3 }), nil, nil)
		var calls counter
		var seen []int
		var last error
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			n := calls.inc()
			seen = append(seen, resilience.Attempt(ctx))
			last = &transientFailure{n: n}
			return last
		})
		require.Equal(t, 3, calls.get())
		require.Equal(t, []int{1, 2, 3}, seen)
		require.Same(t, last, err, "an exhausted retry rethrows the last failure untranslated")
		require.False(t, failure.IsDependencyUnavailable(err))
	})

	t.Run("MaxAttemptsOneDisablesRetry", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.MaxAttempts = 1 }), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return droppedConnection
		})
		require.Same(t, droppedConnection, err)
		require.Equal(t, 1, calls.get())
	})

	t.Run("TerminalFailureIsNotRepeated", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, establish, resilience.OperationFolderDiscovery, func(ctx context.Context) error {
			calls.inc()
			return terminalFailure
		})
		require.Same(t, terminalFailure, err)
		require.Equal(t, 1, calls.get(), "a rejected credential is attempted exactly once")
	})

	t.Run("RecoversAfterTransientFailures", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.MaxAttempts = 4 }), nil, nil)
		got, err := resilience.Get(ctx, b.registry, accountA, "INBOX", func(ctx context.Context) (int, error) {
			if resilience.Attempt(ctx) < 3 {
				return 0, droppedConnection
			}
			return 42, nil
		})
		require.NoError(t, err)
		require.Equal(t, 42, got)
	})

	t.Run("GetReturnsTheZeroValueWithAnError", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		got, err := resilience.Get(ctx, b.registry, accountA, "INBOX", func(ctx context.Context) (string, error) {
			return "partial", terminalFailure
		})
		require.ErrorIs(t, err, terminalFailure)
		require.Empty(t, got)
	})

	t.Run("LimiterRejectsBeyondTheLimitWithoutQueueing", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.ConcurrencyLimit = 2 }), nil, nil)
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
					started.Done()
					<-release
					return nil
				}))
			})
		}
		started.Wait()

		var calls counter
		begin := time.Now()
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return nil
		})
		require.Less(t, time.Since(begin), time.Second, "a rejection is immediate, not queued")
		requireUnavailable(t, err, accountA, resilience.RejectionConcurrencyLimit, bulkhead.ErrFull)
		require.Zero(t, calls.get(), "a shed execution consumes no other budget")

		// The limit is the instance's own: another account is not shed.
		require.NoError(t, b.registry.Execute(ctx, accountB, "INBOX", func(ctx context.Context) error { return nil }))

		close(release)
		wg.Wait()
		require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return nil }),
			"the permits are released when the executions end")
	})

	t.Run("TotalTimeoutDuringBackoffSurfacesTheLastFailure", func(t *testing.T) {
		t.Parallel()
		// The first attempt fails after 1.5s; the backoff then waits 1–2s,
		// and the total timeout (2s) expires during it. Half a second of
		// margin on either side.
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 5
			b.BaseDelay, b.MaxDelay = 2*time.Second, 2*time.Second
			b.AttemptTimeout, b.TotalTimeout = 2*time.Second, 2*time.Second
		}), nil, nil)
		var calls counter
		failure := &transientFailure{}
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			select {
			case <-time.After(1500 * time.Millisecond):
				return failure
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		require.Same(t, failure, err, "not a rejection: the failure that ended the last attempt")
		require.Equal(t, 1, calls.get(), "the remaining attempts are abandoned")
	})

	t.Run("TotalTimeoutDuringBackoffAfterAnAbandonedAttemptIsUnavailable", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 5
			// Abandoned at 1.5s, the attempt is followed by a 1–2s wait the
			// total timeout (2s) ends.
			b.BaseDelay, b.MaxDelay = 2*time.Second, 2*time.Second
			b.AttemptTimeout, b.TotalTimeout = 1500*time.Millisecond, 2*time.Second
		}), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return blockUntilDone(ctx)
		})
		requireUnavailable(t, err, accountA, resilience.RejectionAttemptTimeout, timeout.ErrExceeded)
		require.Equal(t, 1, calls.get())
	})

	t.Run("TotalTimeoutInsideAnAttemptIsUnavailable", func(t *testing.T) {
		t.Parallel()
		// Attempt 1 fails after 500ms, the backoff waits 10–20ms, attempt 2
		// stalls: the total timeout (1s) expires inside it, half a second
		// before its own attempt timeout (1s after it started) would.
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 5
			b.BaseDelay, b.MaxDelay = 20*time.Millisecond, 20*time.Millisecond
			b.AttemptTimeout, b.TotalTimeout = time.Second, time.Second
		}), nil, nil)
		var calls counter
		var secondCanceled bool
		begin := time.Now()
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			if calls.inc() == 1 {
				time.Sleep(500 * time.Millisecond)
				return droppedConnection
			}
			err := blockUntilDone(ctx)
			secondCanceled = ctx.Err() != nil
			return err
		})
		requireUnavailable(t, err, accountA, resilience.RejectionTotalTimeout, timeout.ErrExceeded)
		require.Equal(t, 2, calls.get())
		require.True(t, secondCanceled, "the expiry cancels the attempt's context")
		require.Less(t, time.Since(begin), 5*time.Second)
	})

	t.Run("AttemptTimeoutMakesAStalledAttemptTransient", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.AttemptTimeout = 50 * time.Millisecond }), nil, nil)
		var firstCtxErr error
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			if resilience.Attempt(ctx) == 1 {
				err := blockUntilDone(ctx)
				firstCtxErr = ctx.Err()
				return err
			}
			return nil
		})
		require.NoError(t, err, "the stalled attempt was abandoned and retried")
		require.ErrorIs(t, firstCtxErr, context.Canceled, "the attempt timeout cancels the attempt's context")
	})

	t.Run("AttemptTimeoutThatExhaustsTheRetriesIsUnavailable", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 2
			b.AttemptTimeout = 30 * time.Millisecond
		}), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return blockUntilDone(ctx)
		})
		requireUnavailable(t, err, accountA, resilience.RejectionAttemptTimeout, timeout.ErrExceeded)
		require.Equal(t, 2, calls.get())
	})

	t.Run("AttemptTimeoutIsNotRepeatedWhereTheFamilySaysSo", func(t *testing.T) {
		t.Parallel()
		// A family whose calls may have taken effect when an attempt is
		// abandoned leaves ErrAttemptTimeout terminal.
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.AttemptTimeout = 30 * time.Millisecond }), nil,
			map[resilience.Family]resilience.Classifier{resilience.FamilyProvider: resilience.ClassifierFunc(func(error) bool { return false })})
		var calls counter
		err := b.registry.Execute(ctx, provider, "embed", func(ctx context.Context) error {
			calls.inc()
			return blockUntilDone(ctx)
		})
		requireUnavailable(t, err, provider, resilience.RejectionAttemptTimeout, timeout.ErrExceeded)
		require.Equal(t, 1, calls.get())
	})

	// An attempt abandoned at its timeout may still obtain its resource as
	// it returns: Acquire releases it rather than leak it.
	t.Run("AcquireReleasesWhatAnAbandonedAttemptObtained", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.AttemptTimeout = 30 * time.Millisecond; b.MaxAttempts = 2 }), nil, nil)
		var released []string
		release := func(r string) { released = append(released, r) }
		var calls counter
		got, err := resilience.Acquire(ctx, b.registry, accountA, "INBOX", func(ctx context.Context) (string, error) {
			if calls.inc() == 1 {
				<-ctx.Done() // slower than the attempt timeout, and obtained anyway
				return "first", nil
			}
			return "second", nil
		}, release)
		require.NoError(t, err)
		require.Equal(t, "second", got)
		require.Equal(t, []string{"first"}, released)

		released = nil
		_, err = resilience.Acquire(ctx, b.registry, accountB, "INBOX", func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "late", nil
		}, release)
		require.True(t, failure.IsDependencyUnavailable(err))
		require.Equal(t, []string{"late", "late"}, released, "every attempt's resource, none returned")
	})

	t.Run("PanicPropagatesAndReleasesThePermit", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) { b.ConcurrencyLimit = 1 }), nil, nil)
		var calls counter
		require.PanicsWithValue(t, "boom", func() {
			_ = b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
				calls.inc()
				panic("boom")
			})
		})
		require.Equal(t, 1, calls.get(), "a panic is not retried")
		require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return nil }),
			"the only permit was released")
	})

	t.Run("UndeclaredClassResolvesNoPipeline", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		var calls counter
		for _, class := range []resilience.DependencyClass{"MailboxDataRetreival", "", "mailboxdataretrieval"} {
			err := b.registry.Execute(ctx, resilience.Key{Class: class, Instance: "account-a"}, "INBOX", func(ctx context.Context) error {
				calls.inc()
				return nil
			})
			require.ErrorIs(t, err, resilience.ErrUndeclaredClass)
			_, err = resilience.Get(ctx, b.registry, resilience.Key{Class: class, Instance: "x"}, "INBOX", func(ctx context.Context) (int, error) {
				calls.inc()
				return 1, nil
			})
			require.ErrorIs(t, err, resilience.ErrUndeclaredClass)
		}
		require.Zero(t, calls.get(), "never \"no resilience\"")
	})

	t.Run("KeyWithoutInstanceIsRefused", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		err := b.registry.Execute(ctx, resilience.Key{Class: resilience.DatabaseCommandExecution}, "vacuum", func(ctx context.Context) error {
			t.Fatal("ran")
			return nil
		})
		require.ErrorIs(t, err, resilience.ErrNoInstance)
	})

	t.Run("RunnerIsBoundToItsKey", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		run := b.registry.Runner(database)
		require.Equal(t, database, run.Key())
		require.NoError(t, run.Execute(ctx, "select", func(ctx context.Context) error {
			require.True(t, resilience.InFlight(ctx, resilience.DatabaseCommandExecution))
			return nil
		}))
	})

	t.Run("TheFamilyClassifierDecides", func(t *testing.T) {
		t.Parallel()
		decided := errors.New("the adapter's own verdict: repeatable")
		ctx, b := setup(t, fastBudget(nil), nil, map[resilience.Family]resilience.Classifier{
			resilience.FamilyProvider: resilience.ClassifierFunc(func(err error) bool { return errors.Is(err, decided) }),
		})
		var calls counter
		err := b.registry.Execute(ctx, provider, "embed", func(ctx context.Context) error {
			calls.inc()
			return decided
		})
		require.ErrorIs(t, err, decided)
		require.Equal(t, 3, calls.get())
		require.Equal(t, resilience.Transient, b.registry.Classify(resilience.AiProviderInvocation, decided))
		require.Equal(t, resilience.Transient, b.registry.Classify(resilience.MailAuthorizationServerInvocation, decided), "the same family")
		require.Equal(t, resilience.Terminal, b.registry.Classify(resilience.MailboxDataRetrieval, decided), "another family's classifier")
	})
}

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()

	circuitBudget := fastBudget(func(b *resilience.Budget) {
		b.MaxAttempts = 1
		b.CircuitBreakerFailureRatio = 0.5
		b.CircuitBreakerMinimumThroughput = 4
		b.CircuitBreakerSamplingDuration = 10 * time.Second
		b.CircuitBreakerBreakDuration = 150 * time.Millisecond
	})
	fail := func(ctx context.Context) error { return droppedConnection }
	succeed := func(ctx context.Context) error { return nil }

	// open fails n attempts against key.
	open := func(t *testing.T, ctx context.Context, b *testBundle, key resilience.Key, n int) {
		t.Helper()
		for range n {
			require.Same(t, droppedConnection, b.registry.Execute(ctx, key, "INBOX", fail))
		}
	}

	t.Run("OpensAtTheRatioOnceTheMinimumThroughputIsReached", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, circuitBudget, nil, nil)
		var calls counter
		counted := func(err error) func(context.Context) error {
			return func(context.Context) error { calls.inc(); return err }
		}
		// Three failures out of three: the ratio is reached but not the
		// minimum throughput, so the fourth attempt still runs.
		open(t, ctx, b, accountA, 3)
		require.Same(t, droppedConnection, b.registry.Execute(ctx, accountA, "INBOX", counted(droppedConnection)))
		require.Equal(t, 1, calls.get())
		// Four of four: open.
		err := b.registry.Execute(ctx, accountA, "INBOX", counted(nil))
		requireUnavailable(t, err, accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)
		require.Equal(t, 1, calls.get(), "an open circuit runs nothing")
	})

	t.Run("StaysClosedBelowTheRatio", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, circuitBudget, nil, nil)
		for range 3 {
			require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", succeed))
		}
		open(t, ctx, b, accountA, 1) // 1 of 4 failed: 0.25 < 0.5
		var calls counter
		require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { calls.inc(); return nil }))
		require.Equal(t, 1, calls.get())
	})

	// The break runs out on the fake clock of a synctest bubble: the
	// breaker reads time.Now, and a Sleep inside the bubble moves it
	// exactly as far as asked, at once.
	breakDuration := circuitBudget.CircuitBreakerBreakDuration

	t.Run("HalfOpensAfterTheBreakAndATrialSuccessCloses", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, b := setup(t, circuitBudget, nil, nil)
			open(t, ctx, b, accountA, 4)
			requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)

			time.Sleep(breakDuration - time.Nanosecond)
			requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)

			time.Sleep(time.Nanosecond)
			var calls counter
			require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
				calls.inc()
				return nil
			}), "after the break one trial call goes through")
			require.Equal(t, 1, calls.get())
			require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), "its success closed the circuit")
			require.Contains(t, b.logs.String(), `"msg":"outbound circuit closed"`)
		})
	})

	t.Run("AFailedTrialOpensAgain", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, b := setup(t, circuitBudget, nil, nil)
			open(t, ctx, b, accountA, 4)
			time.Sleep(breakDuration)
			open(t, ctx, b, accountA, 1)
			requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)
		})
	})

	t.Run("OneCircuitPerInstance", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, circuitBudget, nil, nil)
		open(t, ctx, b, accountA, 4)
		requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)

		var calls counter
		require.NoError(t, b.registry.Execute(ctx, accountB, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return nil
		}), "account B reads through a breaker that never saw account A's failures")
		require.Equal(t, 1, calls.get())
		// Nor does the other class of the same account share it.
		require.NoError(t, b.registry.Execute(ctx, establish, resilience.OperationFolderDiscovery, succeed))
	})

	t.Run("TerminalFailuresAndCancellationsDoNotOpenIt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, circuitBudget, nil, nil)
		for range 6 {
			require.Same(t, terminalFailure, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return terminalFailure }))
		}
		for range 6 {
			cctx, cancel := context.WithCancel(ctx)
			err := b.registry.Execute(cctx, accountA, "INBOX", func(ctx context.Context) error {
				cancel()
				return blockUntilDone(ctx)
			})
			require.ErrorIs(t, err, context.Canceled)
		}
		require.NoError(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), "a server that answers is not an outage")
	})

	t.Run("AbandonedAttemptsOpenIt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 1
			b.AttemptTimeout = 20 * time.Millisecond
			b.CircuitBreakerMinimumThroughput = 2
		}), nil, nil)
		for range 2 {
			requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", blockUntilDone), accountA, resilience.RejectionAttemptTimeout, timeout.ErrExceeded)
		}
		requireUnavailable(t, b.registry.Execute(ctx, accountA, "INBOX", succeed), accountA, resilience.RejectionCircuitOpen, circuitbreaker.ErrOpen)
	})
}

func TestCancellation(t *testing.T) {
	t.Parallel()

	t.Run("DuringAnAttempt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		cctx, cancel := context.WithCancel(ctx)
		var calls counter
		err := b.registry.Execute(cctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			cancel()
			return blockUntilDone(ctx)
		})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, failure.IsDependencyUnavailable(err))
		require.Equal(t, 1, calls.get(), "never repeated")
		require.Equal(t, resilience.Canceled, b.registry.Classify(resilience.MailboxDataRetrieval, err))
	})

	t.Run("DuringABackoffWait", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.BaseDelay, b.MaxDelay = 5*time.Second, 5*time.Second
		}), nil, nil)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		var calls counter
		begin := time.Now()
		err := b.registry.Execute(cctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			return droppedConnection
		})
		require.Equal(t, context.Canceled, err, "the caller's cancellation, not the dependency's failure")
		require.Equal(t, 1, calls.get())
		require.Less(t, time.Since(begin), 2*time.Second, "the wait ends with the caller's context")
	})

	t.Run("FailureThatHidesTheCancellation", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		cctx, cancel := context.WithCancel(ctx)
		var calls counter
		err := b.registry.Execute(cctx, accountA, "INBOX", func(ctx context.Context) error {
			calls.inc()
			cancel()
			return droppedConnection // what closing the socket on cancellation produces
		})
		require.Equal(t, context.Canceled, err)
		require.Equal(t, 1, calls.get())
	})

	t.Run("BeforeTheCall", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := b.registry.Execute(cctx, accountA, "INBOX", func(ctx context.Context) error {
			t.Fatal("ran")
			return nil
		})
		require.Equal(t, context.Canceled, err)
	})

	t.Run("CallerDeadlineStaysTheCallers", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		err := b.registry.Execute(dctx, database, "select", blockUntilDone)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, failure.IsDependencyUnavailable(err))
	})
}

func TestSingleLayerRule(t *testing.T) {
	t.Parallel()

	t.Run("SameClassNestedFailsImmediately", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		var outer, inner counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			outer.inc()
			require.True(t, resilience.InFlight(ctx, resilience.MailboxDataRetrieval))
			// Another instance of the same class is the same layer too.
			return b.registry.Execute(ctx, accountB, "INBOX", func(ctx context.Context) error {
				inner.inc()
				return nil
			})
		})
		require.ErrorIs(t, err, resilience.ErrNestedSameClass)
		require.Equal(t, 1, outer.get(), "the refusal is terminal: the outer layer does not repeat it")
		require.Zero(t, inner.get())
	})

	t.Run("DifferentClassesNest", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		var calls counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			outerAttempt := resilience.Attempt(ctx)
			return b.registry.Execute(ctx, establish, "INBOX", func(ctx context.Context) error {
				require.True(t, resilience.InFlight(ctx, resilience.MailboxDataRetrieval))
				require.True(t, resilience.InFlight(ctx, resilience.MailboxSessionEstablishment))
				return b.registry.Execute(ctx, resilience.Key{Class: resilience.MailAuthorizationServerInvocation, Instance: "account-a"}, "token", func(ctx context.Context) error {
					calls.inc()
					require.Equal(t, 1, resilience.Attempt(ctx))
					require.Equal(t, 1, outerAttempt)
					return nil
				})
			})
		})
		require.NoError(t, err)
		require.Equal(t, 1, calls.get())
	})

	t.Run("SequentialExecutionsOfOneClassAreOneLayerEach", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), nil, nil)
		for range 3 {
			require.NoError(t, b.registry.Execute(ctx, database, "select", func(ctx context.Context) error { return nil }))
		}
		require.False(t, resilience.InFlight(ctx, resilience.DatabaseCommandExecution), "the mark ends with the execution")
	})

	t.Run("NestedRejectionIsNotTakenForTheOuterPipelinesOwn", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(nil), map[resilience.DependencyClass]resilience.Budget{
			resilience.MailboxSessionEstablishment: fastBudget(func(b *resilience.Budget) {
				b.MaxAttempts = 1
				b.AttemptTimeout = 20 * time.Millisecond
			}),
		}, nil)
		var outer counter
		err := b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error {
			outer.inc()
			return b.registry.Execute(ctx, establish, "INBOX", blockUntilDone)
		})
		requireUnavailable(t, err, establish, resilience.RejectionAttemptTimeout, timeout.ErrExceeded)
		require.Equal(t, 1, outer.get(), "the establishment's verdict is not multiplied by the retrieval's retries")
	})
}
