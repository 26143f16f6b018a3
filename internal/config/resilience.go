package config

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Outbound resilience: one budget per dependency class, from
// MAILFATHOM_RESILIENCE_<CLASS>_<SETTING>. Every setting defaults to the
// class's entry in resilience.DefaultBudgets, so a deployment names only the
// limits it disagrees with. A variable naming no class or no setting is an
// unknown variable and fails startup like any other, with a suggestion for
// a near miss.

// Resilience is the budget of every dependency class, keyed by class; the
// settings are read once at startup. Package resilience builds its
// pipelines from it.
type Resilience map[resilience.DependencyClass]resilience.Budget

// ClassVariablePart returns a class in upper snake case as it appears in
// variable names: MailboxDataRetrieval is MAILBOX_DATA_RETRIEVAL.
func ClassVariablePart(c resilience.DependencyClass) string {
	var b strings.Builder
	for i, r := range string(c) {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// ResilienceSettings lists the setting part of every resilience variable.
var ResilienceSettings = []string{
	"MAX_ATTEMPTS", "BASE_DELAY", "MAX_DELAY", "ATTEMPT_TIMEOUT", "TOTAL_TIMEOUT",
	"CIRCUIT_BREAKER_FAILURE_RATIO", "CIRCUIT_BREAKER_MINIMUM_THROUGHPUT",
	"CIRCUIT_BREAKER_SAMPLING_DURATION", "CIRCUIT_BREAKER_BREAK_DURATION",
	"CONCURRENCY_LIMIT",
}

// rawResilience binds one section per class. The fields carry no
// envDefault tags: a blank setting takes the class's default from
// resilience.DefaultBudgets, the one table of defaults.
type rawResilience struct {
	MailboxSessionEstablishment       rawBudget `envPrefix:"MAILBOX_SESSION_ESTABLISHMENT_"`
	MailboxDataRetrieval              rawBudget `envPrefix:"MAILBOX_DATA_RETRIEVAL_"`
	DatabaseCommandExecution          rawBudget `envPrefix:"DATABASE_COMMAND_EXECUTION_"`
	AiProviderInvocation              rawBudget `envPrefix:"AI_PROVIDER_INVOCATION_"`
	MailAuthorizationServerInvocation rawBudget `envPrefix:"MAIL_AUTHORIZATION_SERVER_INVOCATION_"`
}

func (r rawResilience) byClass() map[resilience.DependencyClass]rawBudget {
	return map[resilience.DependencyClass]rawBudget{
		resilience.MailboxSessionEstablishment:       r.MailboxSessionEstablishment,
		resilience.MailboxDataRetrieval:              r.MailboxDataRetrieval,
		resilience.DatabaseCommandExecution:          r.DatabaseCommandExecution,
		resilience.AiProviderInvocation:              r.AiProviderInvocation,
		resilience.MailAuthorizationServerInvocation: r.MailAuthorizationServerInvocation,
	}
}

type rawBudget struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS"`
	BaseDelay                       string `env:"BASE_DELAY"`
	MaxDelay                        string `env:"MAX_DELAY"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT"`
}

// budgetDefaults renders a budget in the form its variables take, keyed by
// setting: what an unset variable means.
func budgetDefaults(b resilience.Budget) map[string]string {
	return map[string]string{
		"MAX_ATTEMPTS":                       strconv.Itoa(b.MaxAttempts),
		"BASE_DELAY":                         formatDuration(b.BaseDelay),
		"MAX_DELAY":                          formatDuration(b.MaxDelay),
		"ATTEMPT_TIMEOUT":                    formatDuration(b.AttemptTimeout),
		"TOTAL_TIMEOUT":                      formatDuration(b.TotalTimeout),
		"CIRCUIT_BREAKER_FAILURE_RATIO":      strconv.FormatFloat(b.CircuitBreakerFailureRatio, 'f', -1, 64),
		"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT": strconv.Itoa(b.CircuitBreakerMinimumThroughput),
		"CIRCUIT_BREAKER_SAMPLING_DURATION":  formatDuration(b.CircuitBreakerSamplingDuration),
		"CIRCUIT_BREAKER_BREAK_DURATION":     formatDuration(b.CircuitBreakerBreakDuration),
		"CONCURRENCY_LIMIT":                  strconv.Itoa(b.ConcurrencyLimit),
	}
}

// resilienceDefault returns the default of a MAILFATHOM_RESILIENCE_
// variable, and false for a name that is not one.
func resilienceDefault(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, resilienceSectionPrefix)
	if !ok {
		return "", false
	}
	for class, b := range resilience.DefaultBudgets() {
		if setting, ok := strings.CutPrefix(rest, ClassVariablePart(class)+"_"); ok {
			v, ok := budgetDefaults(b)[setting]
			return v, ok
		}
	}
	return "", false
}

func convertResilience(c *converter, raw rawResilience) Resilience {
	out := Resilience{}
	defaults := resilience.DefaultBudgets()
	byClass := raw.byClass()
	for _, class := range resilience.Classes() {
		out[class] = convertBudget(c, class, byClass[class], budgetDefaults(defaults[class]))
	}
	return out
}

// Ranges of the resilience settings.
const (
	resilienceMaxCount       = 10000
	resilienceMinDuration    = time.Millisecond
	resilienceMaxDelay       = time.Hour
	resilienceMaxTimeLimit   = 24 * time.Hour
	resilienceSectionPrefix  = Prefix + "RESILIENCE_"
	resilienceRatioViolation = "must be a number greater than 0 and at most 1, such as 0.5"
)

func convertBudget(c *converter, class resilience.DependencyClass, raw rawBudget, defaults map[string]string) resilience.Budget {
	p := resilienceSectionPrefix + ClassVariablePart(class) + "_"
	or := func(setting, v string) string {
		if v == "" {
			return defaults[setting]
		}
		return v
	}
	b := resilience.Budget{
		MaxAttempts:                     c.integer(p+"MAX_ATTEMPTS", or("MAX_ATTEMPTS", raw.MaxAttempts), 1, resilience.MaxAttemptsLimit),
		BaseDelay:                       c.duration(p+"BASE_DELAY", or("BASE_DELAY", raw.BaseDelay), resilienceMinDuration, resilienceMaxDelay),
		MaxDelay:                        c.duration(p+"MAX_DELAY", or("MAX_DELAY", raw.MaxDelay), resilienceMinDuration, resilienceMaxDelay),
		AttemptTimeout:                  c.duration(p+"ATTEMPT_TIMEOUT", or("ATTEMPT_TIMEOUT", raw.AttemptTimeout), resilienceMinDuration, resilienceMaxTimeLimit),
		TotalTimeout:                    c.duration(p+"TOTAL_TIMEOUT", or("TOTAL_TIMEOUT", raw.TotalTimeout), resilienceMinDuration, resilienceMaxTimeLimit),
		CircuitBreakerFailureRatio:      c.ratio(p+"CIRCUIT_BREAKER_FAILURE_RATIO", or("CIRCUIT_BREAKER_FAILURE_RATIO", raw.CircuitBreakerFailureRatio)),
		CircuitBreakerMinimumThroughput: c.integer(p+"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT", or("CIRCUIT_BREAKER_MINIMUM_THROUGHPUT", raw.CircuitBreakerMinimumThroughput), 1, resilienceMaxCount),
		CircuitBreakerSamplingDuration:  c.duration(p+"CIRCUIT_BREAKER_SAMPLING_DURATION", or("CIRCUIT_BREAKER_SAMPLING_DURATION", raw.CircuitBreakerSamplingDuration), resilienceMinDuration, resilienceMaxTimeLimit),
		CircuitBreakerBreakDuration:     c.duration(p+"CIRCUIT_BREAKER_BREAK_DURATION", or("CIRCUIT_BREAKER_BREAK_DURATION", raw.CircuitBreakerBreakDuration), resilienceMinDuration, resilienceMaxTimeLimit),
		ConcurrencyLimit:                c.integer(p+"CONCURRENCY_LIMIT", or("CONCURRENCY_LIMIT", raw.ConcurrencyLimit), 1, resilienceMaxCount),
	}
	// Contradictions: each describes a limit that could never be reached.
	// A value that did not convert is 0 and already reported.
	if b.AttemptTimeout > 0 && b.TotalTimeout > 0 && b.AttemptTimeout > b.TotalTimeout {
		c.add(p+"ATTEMPT_TIMEOUT", "(%s) must not be longer than %sTOTAL_TIMEOUT (%s): an attempt cannot outlive the operation it belongs to",
			formatDuration(b.AttemptTimeout), p, formatDuration(b.TotalTimeout))
	}
	if b.MaxDelay > 0 && b.TotalTimeout > 0 && b.MaxDelay > b.TotalTimeout {
		c.add(p+"MAX_DELAY", "(%s) must not be longer than %sTOTAL_TIMEOUT (%s): a backoff wait that long could never be followed by another attempt",
			formatDuration(b.MaxDelay), p, formatDuration(b.TotalTimeout))
	}
	if b.BaseDelay > 0 && b.MaxDelay > 0 && b.BaseDelay > b.MaxDelay {
		c.add(p+"BASE_DELAY", "(%s) must not be longer than %sMAX_DELAY (%s): the first backoff wait would already exceed the cap",
			formatDuration(b.BaseDelay), p, formatDuration(b.MaxDelay))
	}
	return b
}

// ratio converts a number greater than 0 and at most 1.
func (c *converter) ratio(variable, raw string) float64 {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		c.add(variable, resilienceRatioViolation)
		return 0
	}
	return f
}

// explainUnknownResilience says what an unknown MAILFATHOM_RESILIENCE_
// variable gets wrong: the class, or the setting of a known class. A
// misspelled class is a section nobody reads, which would leave an operator
// convinced they tuned a limit that never moved.
func explainUnknownResilience(k string) string {
	rest := strings.TrimPrefix(k, resilienceSectionPrefix)
	var parts []string
	for _, class := range resilience.Classes() {
		part := ClassVariablePart(class)
		parts = append(parts, part)
		if strings.HasPrefix(rest, part+"_") {
			return ": " + strings.TrimPrefix(rest, part+"_") + " is not a setting of " + string(class) +
				"; settings are " + strings.Join(ResilienceSettings, ", ")
		}
	}
	return ": it names no dependency class; " + resilienceSectionPrefix + "<CLASS>_<SETTING> takes a CLASS of " + strings.Join(parts, ", ")
}
