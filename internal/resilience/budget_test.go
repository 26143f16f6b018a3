package resilience_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

func TestClasses(t *testing.T) {
	t.Parallel()
	require.Equal(t, []resilience.DependencyClass{
		resilience.MailboxSessionEstablishment,
		resilience.MailboxDataRetrieval,
		resilience.DatabaseCommandExecution,
		resilience.AiProviderInvocation,
		resilience.MailAuthorizationServerInvocation,
	}, resilience.Classes())

	for _, c := range resilience.Classes() {
		require.True(t, c.Declared())
		require.NotEmpty(t, c.Family())
	}
	for _, c := range []resilience.DependencyClass{"", "Mailbox", "mailboxDataRetrieval", "EmailDelivery"} {
		require.False(t, c.Declared(), c)
		require.Empty(t, c.Family())
	}
	require.Equal(t, resilience.FamilyMailbox, resilience.MailboxSessionEstablishment.Family())
	require.Equal(t, resilience.FamilyMailbox, resilience.MailboxDataRetrieval.Family())
	require.Equal(t, resilience.FamilyDatabase, resilience.DatabaseCommandExecution.Family())
	require.Equal(t, resilience.FamilyProvider, resilience.AiProviderInvocation.Family())
	require.Equal(t, resilience.FamilyProvider, resilience.MailAuthorizationServerInvocation.Family())
	require.Equal(t, "MailboxDataRetrieval/account-a", accountA.String())
}

func TestDefaultBudgets(t *testing.T) {
	t.Parallel()
	defaults := resilience.DefaultBudgets()
	require.Len(t, defaults, len(resilience.Classes()))
	for class, b := range defaults {
		require.NoError(t, b.Validate(), class)
	}

	// The retrieval default, as documented.
	require.Equal(t, resilience.Budget{
		MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 15 * time.Second,
		AttemptTimeout: time.Minute, TotalTimeout: 3 * time.Minute,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 10,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 15 * time.Second,
		ConcurrencyLimit: 8,
	}, defaults[resilience.MailboxDataRetrieval])

	// Callers get their own copy.
	delete(defaults, resilience.MailboxDataRetrieval)
	require.Len(t, resilience.DefaultBudgets(), len(resilience.Classes()))
	defaults = resilience.DefaultBudgets()

	// The authorization server's whole budget sits inside the
	// establishment attempt that encloses a token request.
	require.Less(t, defaults[resilience.MailAuthorizationServerInvocation].TotalTimeout, defaults[resilience.MailboxSessionEstablishment].AttemptTimeout)
}

func TestNewRegistryTakesTheBudgets(t *testing.T) {
	t.Parallel()
	budgets := resilience.DefaultBudgets()
	retrieval := budgets[resilience.MailboxDataRetrieval]
	retrieval.MaxAttempts = 1
	reg, err := resilience.NewRegistry(resilience.Options{
		Budgets:     map[resilience.DependencyClass]resilience.Budget{resilience.MailboxDataRetrieval: retrieval},
		Classifiers: testClassifiers(),
	})
	require.NoError(t, err)
	b, ok := reg.Budget(resilience.MailboxDataRetrieval)
	require.True(t, ok)
	require.Equal(t, 1, b.MaxAttempts)
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(b *resilience.Budget)
		want   string
	}{
		{"no attempts", func(b *resilience.Budget) { b.MaxAttempts = 0 }, "MaxAttempts 0 is not from 1 to 20"},
		{"too many attempts", func(b *resilience.Budget) { b.MaxAttempts = 21 }, "MaxAttempts 21"},
		{"zero base delay", func(b *resilience.Budget) { b.BaseDelay = 0 }, "BaseDelay 0s is not positive"},
		{"negative break", func(b *resilience.Budget) { b.CircuitBreakerBreakDuration = -time.Second }, "CircuitBreakerBreakDuration -1s is not positive"},
		{"zero sampling", func(b *resilience.Budget) { b.CircuitBreakerSamplingDuration = 0 }, "CircuitBreakerSamplingDuration"},
		{"zero ratio", func(b *resilience.Budget) { b.CircuitBreakerFailureRatio = 0 }, "CircuitBreakerFailureRatio 0"},
		{"ratio above one", func(b *resilience.Budget) { b.CircuitBreakerFailureRatio = 1.5 }, "CircuitBreakerFailureRatio 1.5"},
		{"no throughput", func(b *resilience.Budget) { b.CircuitBreakerMinimumThroughput = 0 }, "CircuitBreakerMinimumThroughput 0"},
		{"no concurrency", func(b *resilience.Budget) { b.ConcurrencyLimit = 0 }, "ConcurrencyLimit 0"},
		{"attempt outlives total", func(b *resilience.Budget) { b.AttemptTimeout = 11 * time.Second }, "AttemptTimeout 11s is longer than TotalTimeout 10s"},
		{"max delay beyond total", func(b *resilience.Budget) { b.MaxDelay, b.BaseDelay = 11*time.Second, time.Second }, "MaxDelay 11s is longer than TotalTimeout 10s"},
		{"base beyond max", func(b *resilience.Budget) { b.BaseDelay = 3 * time.Millisecond }, "BaseDelay 3ms is longer than MaxDelay 2ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fastBudget(tt.change)
			err := b.Validate()
			require.ErrorContains(t, err, tt.want)

			_, err = resilience.NewRegistry(resilience.Options{
				Budgets:     map[resilience.DependencyClass]resilience.Budget{resilience.AiProviderInvocation: b},
				Classifiers: testClassifiers(),
			})
			require.ErrorContains(t, err, "budget for AiProviderInvocation")
			require.ErrorContains(t, err, tt.want)
		})
	}
	require.NoError(t, fastBudget(func(b *resilience.Budget) { b.MaxAttempts = 1 }).Validate())
}

func TestNewRegistryRefuses(t *testing.T) {
	t.Parallel()
	_, err := resilience.NewRegistry(resilience.Options{
		Budgets:     map[resilience.DependencyClass]resilience.Budget{"MailboxDataRetreival": fastBudget(nil)},
		Classifiers: testClassifiers(),
	})
	require.ErrorIs(t, err, resilience.ErrUndeclaredClass)
	require.ErrorContains(t, err, `"MailboxDataRetreival"`)

	// Every family but Provider needs its adapter's classifier.
	_, err = resilience.NewRegistry(resilience.Options{})
	require.ErrorContains(t, err, "no classifier for family Mailbox")
	require.ErrorContains(t, err, "no classifier for family Database")
	classifiers := testClassifiers()
	classifiers[resilience.FamilyDatabase] = nil
	_, err = resilience.NewRegistry(resilience.Options{Classifiers: classifiers})
	require.ErrorContains(t, err, "the classifier of family Database is nil")

	// A declared class missing from the budgets gets its default.
	reg, err := resilience.NewRegistry(resilience.Options{
		Budgets:     map[resilience.DependencyClass]resilience.Budget{resilience.AiProviderInvocation: fastBudget(nil)},
		Classifiers: testClassifiers(),
	})
	require.NoError(t, err)
	b, ok := reg.Budget(resilience.DatabaseCommandExecution)
	require.True(t, ok)
	require.Equal(t, resilience.DefaultBudgets()[resilience.DatabaseCommandExecution], b)
	_, ok = reg.Budget("Bogus")
	require.False(t, ok)
}
