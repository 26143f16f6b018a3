package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

func TestResilienceDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := testLoader.Load(environ(validEnv(), nil))
	require.NoError(t, err)
	require.Equal(t, Resilience(resilience.DefaultBudgets()), cfg.Resilience)
	require.Len(t, cfg.Resilience, len(resilience.Classes()))
}

// TestResilienceDefaultsKeepTheirRelations pins what the defaults were
// chosen for: the authorization server is the shortest on every time axis
// and its attempt timeout, and even its total, sit well inside the
// establishment attempt enclosing a token request; an establishment's whole
// budget fits inside one retrieval attempt, which is where a retried read
// re-establishes its session.
func TestResilienceDefaultsKeepTheirRelations(t *testing.T) {
	t.Parallel()
	r := resilience.DefaultBudgets()
	a := r[resilience.MailAuthorizationServerInvocation]
	for class, b := range r {
		require.NoError(t, b.Validate(), class)
		if class != resilience.MailAuthorizationServerInvocation {
			require.Less(t, a.BaseDelay, b.BaseDelay, class)
			require.Less(t, a.MaxDelay, b.MaxDelay, class)
			require.Less(t, a.AttemptTimeout, b.AttemptTimeout, class)
			require.Less(t, a.TotalTimeout, b.TotalTimeout, class)
		}
	}
	establishment := r[resilience.MailboxSessionEstablishment]
	require.LessOrEqual(t, 3*a.AttemptTimeout, establishment.AttemptTimeout)
	require.Less(t, a.TotalTimeout, establishment.AttemptTimeout)
	require.Less(t, establishment.TotalTimeout, r[resilience.MailboxDataRetrieval].AttemptTimeout)
}

func TestResilienceVariableNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "MAILBOX_DATA_RETRIEVAL", ClassVariablePart(resilience.MailboxDataRetrieval))
	require.Equal(t, "AI_PROVIDER_INVOCATION", ClassVariablePart(resilience.AiProviderInvocation))
	require.Equal(t, "MAIL_AUTHORIZATION_SERVER_INVOCATION", ClassVariablePart(resilience.MailAuthorizationServerInvocation))

	// Every class binds every setting under its upper snake case name, and
	// nothing else is bound under MAILFATHOM_RESILIENCE_.
	want := map[string]bool{}
	for _, class := range resilience.Classes() {
		for _, setting := range ResilienceSettings {
			want[Prefix+"RESILIENCE_"+ClassVariablePart(class)+"_"+setting] = true
		}
	}
	got := map[string]bool{}
	for _, v := range Variables() {
		if strings.HasPrefix(v.Name, Prefix+"RESILIENCE_") {
			got[v.Name] = true
			require.NotEmpty(t, v.Default, "%s has no default", v.Name)
		}
	}
	require.Equal(t, want, got)
	require.Len(t, got, 50)
}

func TestResilienceOverrides(t *testing.T) {
	t.Parallel()
	cfg, err := testLoader.Load(environ(validEnv(), map[string]string{
		"MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_MAX_ATTEMPTS":                              "1",
		"MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_CIRCUIT_BREAKER_FAILURE_RATIO":             "1",
		"MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_CONCURRENCY_LIMIT":                         "10000",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_BASE_DELAY":                            "1ms",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_MAX_DELAY":                             "1ms",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_TOTAL_TIMEOUT":                      "24h",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_ATTEMPT_TIMEOUT":                    "24h",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_DELAY":                          "1h",
		"MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_MAX_ATTEMPTS":                "20",
		"MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_ATTEMPT_TIMEOUT":             "10s",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_CIRCUIT_BREAKER_MINIMUM_THROUGHPUT": "1",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_CIRCUIT_BREAKER_FAILURE_RATIO":      " 0.25 ",
	}))
	require.NoError(t, err)
	r := cfg.Resilience
	retrieval, establishment := r[resilience.MailboxDataRetrieval], r[resilience.MailboxSessionEstablishment]
	auth := r[resilience.MailAuthorizationServerInvocation]
	require.Equal(t, 1, retrieval.MaxAttempts)
	require.Equal(t, 1.0, retrieval.CircuitBreakerFailureRatio)
	require.Equal(t, 15*time.Second, retrieval.MaxDelay, "an unset setting keeps its class default")
	require.Equal(t, 10000, retrieval.ConcurrencyLimit)
	require.Equal(t, time.Millisecond, r[resilience.DatabaseCommandExecution].BaseDelay)
	require.Equal(t, 24*time.Hour, establishment.AttemptTimeout)
	require.Equal(t, 20, auth.MaxAttempts)
	require.Equal(t, 10*time.Second, auth.AttemptTimeout, "equal to the total is allowed")
	require.Equal(t, 1, establishment.CircuitBreakerMinimumThroughput)
	require.Equal(t, 0.25, establishment.CircuitBreakerFailureRatio)
	require.Equal(t, resilience.DefaultBudgets()[resilience.DatabaseCommandExecution].MaxAttempts, r[resilience.DatabaseCommandExecution].MaxAttempts)
}

func TestResilienceRejects(t *testing.T) {
	t.Parallel()
	const (
		retrieval = "MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_"
		establish = "MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_"
		database  = "MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_"
		auth      = "MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_"
	)
	tests := []struct {
		name      string
		overrides map[string]string
		variable  string
		contains  []string
	}{
		{"attempts zero", map[string]string{retrieval + "MAX_ATTEMPTS": "0"}, retrieval + "MAX_ATTEMPTS", []string{"from 1 to 20"}},
		{"attempts above range", map[string]string{establish + "MAX_ATTEMPTS": "21"}, establish + "MAX_ATTEMPTS", []string{"from 1 to 20"}},
		{"attempts not a number", map[string]string{establish + "MAX_ATTEMPTS": "twice"}, establish + "MAX_ATTEMPTS", []string{"from 1 to 20"}},
		{"ratio zero", map[string]string{retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO": "0"}, retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO", []string{"greater than 0 and at most 1"}},
		{"ratio above one", map[string]string{retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO": "1.01"}, retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO", []string{"greater than 0 and at most 1"}},
		{"ratio negative", map[string]string{retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO": "-0.5"}, retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO", []string{"greater than 0 and at most 1"}},
		{"ratio as percentage", map[string]string{retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO": "50%"}, retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO", []string{"such as 0.5"}},
		{"ratio NaN", map[string]string{retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO": "NaN"}, retrieval + "CIRCUIT_BREAKER_FAILURE_RATIO", []string{"greater than 0 and at most 1"}},
		{"minimum throughput zero", map[string]string{database + "CIRCUIT_BREAKER_MINIMUM_THROUGHPUT": "0"}, database + "CIRCUIT_BREAKER_MINIMUM_THROUGHPUT", []string{"from 1 to 10000"}},
		{"concurrency zero", map[string]string{database + "CONCURRENCY_LIMIT": "0"}, database + "CONCURRENCY_LIMIT", []string{"from 1 to 10000"}},
		{"concurrency above range", map[string]string{database + "CONCURRENCY_LIMIT": "10001"}, database + "CONCURRENCY_LIMIT", []string{"from 1 to 10000"}},
		{"zero duration", map[string]string{auth + "CIRCUIT_BREAKER_BREAK_DURATION": "0"}, auth + "CIRCUIT_BREAKER_BREAK_DURATION", []string{"from 1ms to 24h"}},
		{"negative duration", map[string]string{auth + "CIRCUIT_BREAKER_SAMPLING_DURATION": "-1s"}, auth + "CIRCUIT_BREAKER_SAMPLING_DURATION", []string{"from 1ms to 24h"}},
		{"zero attempt timeout", map[string]string{auth + "ATTEMPT_TIMEOUT": "0s"}, auth + "ATTEMPT_TIMEOUT", []string{"from 1ms to 24h"}},
		{"zero base delay", map[string]string{auth + "BASE_DELAY": "0"}, auth + "BASE_DELAY", []string{"from 1ms to 1h"}},
		{"max delay above range", map[string]string{retrieval + "MAX_DELAY": "61m", retrieval + "TOTAL_TIMEOUT": "2h"}, retrieval + "MAX_DELAY", []string{"from 1ms to 1h"}},
		{"total timeout above range", map[string]string{retrieval + "TOTAL_TIMEOUT": "25h"}, retrieval + "TOTAL_TIMEOUT", []string{"from 1ms to 24h"}},
		{"hh:mm:ss duration", map[string]string{retrieval + "TOTAL_TIMEOUT": "00:03:00"}, retrieval + "TOTAL_TIMEOUT", []string{"Go duration"}},

		// Contradictions name both variables.
		{"attempt outlives the total", map[string]string{retrieval + "ATTEMPT_TIMEOUT": "4m"}, retrieval + "ATTEMPT_TIMEOUT",
			[]string{"(4m) must not be longer than " + retrieval + "TOTAL_TIMEOUT (3m)"}},
		{"total shortened below the attempt", map[string]string{auth + "TOTAL_TIMEOUT": "2s"}, auth + "ATTEMPT_TIMEOUT",
			[]string{"(3s) must not be longer than " + auth + "TOTAL_TIMEOUT (2s)"}},
		{"max delay longer than the total", map[string]string{database + "MAX_DELAY": "2m", database + "ATTEMPT_TIMEOUT": "1s"}, database + "MAX_DELAY",
			[]string{"(2m) must not be longer than " + database + "TOTAL_TIMEOUT (1m)"}},
		{"base delay longer than the max delay", map[string]string{database + "BASE_DELAY": "3s"}, database + "BASE_DELAY",
			[]string{"(3s) must not be longer than " + database + "MAX_DELAY (2s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := loadErr(t, environ(validEnv(), tt.overrides))
			require.Len(t, e.Problems, 1, e.Error())
			require.Equal(t, tt.variable, e.Problems[0].Variable)
			for _, s := range tt.contains {
				require.Contains(t, e.Problems[0].Message, s)
			}
		})
	}
}

// TestResilienceContradictionsReportedTogether: every contradiction of every
// class is reported in one pass, and a value that did not convert adds no
// contradiction of its own.
func TestResilienceContradictionsReportedTogether(t *testing.T) {
	t.Parallel()
	e := loadErr(t, environ(validEnv(), map[string]string{
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_ATTEMPT_TIMEOUT":         "2m",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_MAX_DELAY":               "90s",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_BASE_DELAY":              "100s",
		"MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_TOTAL_TIMEOUT": "soon",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_DELAY":            "never",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_TOTAL_TIMEOUT":        "1s",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_ATTEMPT_TIMEOUT":      "1s",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_BASE_DELAY":           "1ms",
	}))
	var got []string
	for _, p := range e.Problems {
		got = append(got, p.Variable)
	}
	require.Equal(t, []string{
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_DELAY",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_ATTEMPT_TIMEOUT",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_MAX_DELAY",
		"MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_BASE_DELAY",
		"MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_TOTAL_TIMEOUT",
	}, got, e.Error())
}

// TestResilienceStrictness: a misspelled class or setting is a section
// nobody reads, so it fails startup naming the variable, saying what is
// wrong with it, and suggesting the near miss.
func TestResilienceStrictness(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		variable string
		contains []string
	}{
		{"misspelled class", "MAILFATHOM_RESILIENCE_DATABASE_COMAND_EXECUTION_MAX_ATTEMPTS", []string{
			"is not a MailFathom variable: it names no dependency class",
			"MAILBOX_SESSION_ESTABLISHMENT, MAILBOX_DATA_RETRIEVAL, DATABASE_COMMAND_EXECUTION, AI_PROVIDER_INVOCATION, MAIL_AUTHORIZATION_SERVER_INVOCATION",
			"did you mean MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_MAX_ATTEMPTS?",
		}},
		{"a class that does not exist", "MAILFATHOM_RESILIENCE_EMAIL_DELIVERY_MAX_ATTEMPTS", []string{"it names no dependency class"}},
		{"class without separators", "MAILFATHOM_RESILIENCE_MAILBOXDATARETRIEVAL_MAX_ATTEMPTS", []string{
			"it names no dependency class", "did you mean MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_MAX_ATTEMPTS?",
		}},
		{"unknown class", "MAILFATHOM_RESILIENCE_SPAM_SCANNER_MAX_ATTEMPTS", []string{"it names no dependency class"}},
		{"misspelled setting", "MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_MAX_ATTEMPT", []string{
			"MAX_ATTEMPT is not a setting of MailboxDataRetrieval; settings are MAX_ATTEMPTS, BASE_DELAY",
			"did you mean MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_MAX_ATTEMPTS?",
		}},
		{"setting of another library", "MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_BREAK_DURATION", []string{
			"BREAK_DURATION is not a setting of DatabaseCommandExecution",
		}},
		{"section without class", "MAILFATHOM_RESILIENCE_MAX_ATTEMPTS", []string{"it names no dependency class"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := loadErr(t, environ(validEnv(), map[string]string{tt.variable: "3"}))
			require.Len(t, e.Problems, 1, e.Error())
			require.Equal(t, tt.variable, e.Problems[0].Variable)
			for _, s := range tt.contains {
				require.Contains(t, e.Problems[0].Message, s)
			}
		})
	}
}
