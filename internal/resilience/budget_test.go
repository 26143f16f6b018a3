package resilience_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

func TestClasses(t *testing.T) {
	t.Parallel()
	require.Equal(t, []resilience.DependencyClass{
		resilience.MailboxSessionEstablishment,
		resilience.MailboxDataRetrieval,
		resilience.EmailDelivery,
		resilience.DatabaseCommandExecution,
		resilience.AiProviderInvocation,
		resilience.MailAuthorizationServerInvocation,
	}, resilience.Classes())

	// Configuration names the same classes, in the same order.
	var configured []resilience.DependencyClass
	for _, c := range config.ResilienceClasses {
		configured = append(configured, resilience.DependencyClass(c))
	}
	require.Equal(t, resilience.Classes(), configured)

	for _, c := range resilience.Classes() {
		require.True(t, c.Declared())
		require.NotEmpty(t, c.Family())
	}
	for _, c := range []resilience.DependencyClass{"", "Mailbox", "mailboxDataRetrieval", "EmailDelivry"} {
		require.False(t, c.Declared(), c)
		require.Empty(t, c.Family())
	}
	require.Equal(t, resilience.FamilyMailbox, resilience.MailboxSessionEstablishment.Family())
	require.Equal(t, resilience.FamilyMailbox, resilience.MailboxDataRetrieval.Family())
	require.Equal(t, resilience.FamilyDelivery, resilience.EmailDelivery.Family())
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

	// The seed's example is the retrieval default.
	require.Equal(t, resilience.Budget{
		MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 15 * time.Second,
		AttemptTimeout: time.Minute, TotalTimeout: 3 * time.Minute,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 10,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 15 * time.Second,
		ConcurrencyLimit: 8,
	}, defaults[resilience.MailboxDataRetrieval])

	// Callers get their own copy.
	delete(defaults, resilience.EmailDelivery)
	require.Len(t, resilience.DefaultBudgets(), len(resilience.Classes()))
	defaults = resilience.DefaultBudgets()

	// Delivery is the smallest budget; the authorization server's attempt
	// sits well inside the establishment attempt that encloses it.
	for class, b := range defaults {
		if class != resilience.EmailDelivery {
			require.Less(t, defaults[resilience.EmailDelivery].MaxAttempts, b.MaxAttempts, class)
		}
	}
	require.Less(t, defaults[resilience.MailAuthorizationServerInvocation].TotalTimeout, defaults[resilience.MailboxSessionEstablishment].AttemptTimeout)
}

func TestBudgetsFromConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]string{
		"MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_MAX_ATTEMPTS=1",
		"MAILFATHOM_RESILIENCE_EMAIL_DELIVERY_CONCURRENCY_LIMIT=1",
	})
	require.NoError(t, err)
	budgets := resilience.BudgetsFromConfig(cfg.Resilience)
	require.Equal(t, 1, budgets[resilience.MailboxDataRetrieval].MaxAttempts)
	require.Equal(t, 1, budgets[resilience.EmailDelivery].ConcurrencyLimit)

	reg, err := resilience.NewRegistry(budgets, nil, nil, nil)
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

			_, err = resilience.NewRegistry(map[resilience.DependencyClass]resilience.Budget{resilience.EmailDelivery: b}, nil, nil, nil)
			require.ErrorContains(t, err, "budget for EmailDelivery")
			require.ErrorContains(t, err, tt.want)
		})
	}
	require.NoError(t, fastBudget(func(b *resilience.Budget) { b.MaxAttempts = 1 }).Validate())
}

func TestNewRegistryRefuses(t *testing.T) {
	t.Parallel()
	_, err := resilience.NewRegistry(map[resilience.DependencyClass]resilience.Budget{"EmailDelivry": fastBudget(nil)}, nil, nil, nil)
	require.ErrorIs(t, err, resilience.ErrUndeclaredClass)
	require.ErrorContains(t, err, `"EmailDelivry"`)

	_, err = resilience.NewRegistry(nil, map[resilience.DependencyClass]resilience.Classifier{"Smtp": resilience.DeliveryClassifier{}}, nil, nil)
	require.ErrorIs(t, err, resilience.ErrUndeclaredClass)

	_, err = resilience.NewRegistry(nil, map[resilience.DependencyClass]resilience.Classifier{resilience.EmailDelivery: nil}, nil, nil)
	require.ErrorContains(t, err, "classifier for EmailDelivery is nil")

	// A declared class missing from the budgets gets its default.
	reg, err := resilience.NewRegistry(map[resilience.DependencyClass]resilience.Budget{resilience.EmailDelivery: fastBudget(nil)}, nil, nil, nil)
	require.NoError(t, err)
	b, ok := reg.Budget(resilience.DatabaseCommandExecution)
	require.True(t, ok)
	require.Equal(t, resilience.DefaultBudgets()[resilience.DatabaseCommandExecution], b)
	_, ok = reg.Budget("Bogus")
	require.False(t, ok)
}
