package config

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Outbound resilience: one budget per dependency class, from
// MAILFATHOM_RESILIENCE_<CLASS>_<SETTING>. Every setting has a class-specific
// default, so a deployment names only the limits it disagrees with. A
// variable naming no class or no setting is an unknown variable and fails
// startup like any other, with a suggestion for a near miss.
//
// Package resilience builds its pipelines from Config.Resilience
// (resilience.BudgetsFromConfig); it owns the class enumeration and keeps a
// test that the class names and defaults here are its own.

// ResilienceClass names a dependency class as package resilience declares
// it, such as MailboxDataRetrieval.
type ResilienceClass string

// The dependency classes, by their seed names. ResilienceClasses lists them.
const (
	ResilienceMailboxSessionEstablishment       ResilienceClass = "MailboxSessionEstablishment"
	ResilienceMailboxDataRetrieval              ResilienceClass = "MailboxDataRetrieval"
	ResilienceEmailDelivery                     ResilienceClass = "EmailDelivery"
	ResilienceDatabaseCommandExecution          ResilienceClass = "DatabaseCommandExecution"
	ResilienceAiProviderInvocation              ResilienceClass = "AiProviderInvocation"
	ResilienceMailAuthorizationServerInvocation ResilienceClass = "MailAuthorizationServerInvocation"
)

// ResilienceClasses lists every dependency class in declaration order.
var ResilienceClasses = []ResilienceClass{
	ResilienceMailboxSessionEstablishment,
	ResilienceMailboxDataRetrieval,
	ResilienceEmailDelivery,
	ResilienceDatabaseCommandExecution,
	ResilienceAiProviderInvocation,
	ResilienceMailAuthorizationServerInvocation,
}

// VariablePart returns the class in upper snake case as it appears in
// variable names: MailboxDataRetrieval is MAILBOX_DATA_RETRIEVAL.
func (c ResilienceClass) VariablePart() string {
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

// ResilienceBudget is the budget of one dependency class. Every remote
// instance of the class (an account, an endpoint alias, the database) gets
// its own pipeline built from it.
type ResilienceBudget struct {
	// MaxAttempts is _MAX_ATTEMPTS, the attempts of one operation counting
	// the first call, 1 to 20; 1 disables retry and keeps the other limits.
	MaxAttempts int
	// BaseDelay is _BASE_DELAY, the backoff ceiling before the first retry,
	// doubled per retry, 1ms to 1h and not longer than MaxDelay.
	BaseDelay time.Duration
	// MaxDelay is _MAX_DELAY, the cap of one backoff wait, 1ms to 1h and not
	// longer than TotalTimeout.
	MaxDelay time.Duration
	// AttemptTimeout is _ATTEMPT_TIMEOUT, the bound of one attempt, 1ms to
	// 24h and not longer than TotalTimeout.
	AttemptTimeout time.Duration
	// TotalTimeout is _TOTAL_TIMEOUT, the bound of the whole operation
	// including its backoff waits, 1ms to 24h.
	TotalTimeout time.Duration
	// CircuitBreakerFailureRatio is _CIRCUIT_BREAKER_FAILURE_RATIO, the
	// share of failed attempts in the sampling window that opens the
	// circuit, greater than 0 and at most 1.
	CircuitBreakerFailureRatio float64
	// CircuitBreakerMinimumThroughput is _CIRCUIT_BREAKER_MINIMUM_THROUGHPUT,
	// the attempts the window must hold before the ratio counts, 1 to 10000.
	CircuitBreakerMinimumThroughput int
	// CircuitBreakerSamplingDuration is _CIRCUIT_BREAKER_SAMPLING_DURATION,
	// the sliding window the ratio is measured over, 1ms to 24h.
	CircuitBreakerSamplingDuration time.Duration
	// CircuitBreakerBreakDuration is _CIRCUIT_BREAKER_BREAK_DURATION, how
	// long an open circuit rejects before one trial call, 1ms to 24h.
	CircuitBreakerBreakDuration time.Duration
	// ConcurrencyLimit is _CONCURRENCY_LIMIT, the operations in flight per
	// remote instance; one more is rejected, never queued. 1 to 10000.
	ConcurrencyLimit int
}

// Resilience holds the budget of every dependency class. The settings are
// read once at startup.
type Resilience struct {
	// MailboxSessionEstablishment (MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_*):
	// connecting, TLS, authenticating and selecting a folder read-only.
	MailboxSessionEstablishment ResilienceBudget
	// MailboxDataRetrieval (MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_*):
	// listing, searching and fetching over an established session.
	MailboxDataRetrieval ResilienceBudget
	// EmailDelivery (MAILFATHOM_RESILIENCE_EMAIL_DELIVERY_*): submitting an
	// email to the SMTP server.
	EmailDelivery ResilienceBudget
	// DatabaseCommandExecution (MAILFATHOM_RESILIENCE_DATABASE_COMMAND_EXECUTION_*):
	// commands against the local PostgreSQL database that own no
	// transaction.
	DatabaseCommandExecution ResilienceBudget
	// AiProviderInvocation (MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_*):
	// chat and embedding provider calls.
	AiProviderInvocation ResilienceBudget
	// MailAuthorizationServerInvocation
	// (MAILFATHOM_RESILIENCE_MAIL_AUTHORIZATION_SERVER_INVOCATION_*):
	// exchanging an OAuth grant for a mailbox access token.
	MailAuthorizationServerInvocation ResilienceBudget
}

// Budgets returns every class's budget keyed by class.
func (r Resilience) Budgets() map[ResilienceClass]ResilienceBudget {
	return map[ResilienceClass]ResilienceBudget{
		ResilienceMailboxSessionEstablishment:       r.MailboxSessionEstablishment,
		ResilienceMailboxDataRetrieval:              r.MailboxDataRetrieval,
		ResilienceEmailDelivery:                     r.EmailDelivery,
		ResilienceDatabaseCommandExecution:          r.DatabaseCommandExecution,
		ResilienceAiProviderInvocation:              r.AiProviderInvocation,
		ResilienceMailAuthorizationServerInvocation: r.MailAuthorizationServerInvocation,
	}
}

// rawResilience binds one section per class. Each class has a raw type of
// its own because the defaults live in envDefault tags and differ by class;
// the types convert to rawBudget, which has the same fields.
type rawResilience struct {
	MailboxSessionEstablishment       rawMailboxSessionEstablishment       `envPrefix:"MAILBOX_SESSION_ESTABLISHMENT_"`
	MailboxDataRetrieval              rawMailboxDataRetrieval              `envPrefix:"MAILBOX_DATA_RETRIEVAL_"`
	EmailDelivery                     rawEmailDelivery                     `envPrefix:"EMAIL_DELIVERY_"`
	DatabaseCommandExecution          rawDatabaseCommandExecution          `envPrefix:"DATABASE_COMMAND_EXECUTION_"`
	AiProviderInvocation              rawAiProviderInvocation              `envPrefix:"AI_PROVIDER_INVOCATION_"`
	MailAuthorizationServerInvocation rawMailAuthorizationServerInvocation `envPrefix:"MAIL_AUTHORIZATION_SERVER_INVOCATION_"`
}

type rawBudget struct {
	MaxAttempts                     string
	BaseDelay                       string
	MaxDelay                        string
	AttemptTimeout                  string
	TotalTimeout                    string
	CircuitBreakerFailureRatio      string
	CircuitBreakerMinimumThroughput string
	CircuitBreakerSamplingDuration  string
	CircuitBreakerBreakDuration     string
	ConcurrencyLimit                string
}

// Establishment: only a transport failure is repeated. Its total timeout
// fits inside one MailboxDataRetrieval attempt, because a retried read
// re-establishes the session inside that attempt.
type rawMailboxSessionEstablishment struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"3"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"1s"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"10s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"15s"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"45s"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"5"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"1m"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"30s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"4"`
}

// Retrieval: the seed's example budget.
type rawMailboxDataRetrieval struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"4"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"1s"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"15s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"1m"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"3m"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"10"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"30s"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"15s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"8"`
}

// Delivery: the smallest budget, because a repeated submission is visible
// in the recipient's inbox: the fewest attempts and the lowest concurrency.
type rawEmailDelivery struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"2"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"1s"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"5s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"30s"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"1m"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"5"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"1m"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"30s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"2"`
}

// Database: one process-wide pipeline; short backoff, quick break, and a
// limit above the largest pool so the pool queues rather than the limiter
// shedding.
type rawDatabaseCommandExecution struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"3"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"200ms"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"2s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"30s"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"1m"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"20"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"30s"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"5s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"200"`
}

// Providers: a generation can take a while; a provider's 429 deserves a
// longer break.
type rawAiProviderInvocation struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"3"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"1s"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"10s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"1m"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"3m"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"10"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"30s"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"30s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"4"`
}

// Authorization server: short on every axis. Its attempt timeout (3s), and
// even its total (10s), sit well inside the establishment attempt (15s)
// that encloses a token request, so a hung authorization server surfaces as
// itself rather than as a mailbox timeout.
type rawMailAuthorizationServerInvocation struct {
	MaxAttempts                     string `env:"MAX_ATTEMPTS" envDefault:"3"`
	BaseDelay                       string `env:"BASE_DELAY" envDefault:"100ms"`
	MaxDelay                        string `env:"MAX_DELAY" envDefault:"1s"`
	AttemptTimeout                  string `env:"ATTEMPT_TIMEOUT" envDefault:"3s"`
	TotalTimeout                    string `env:"TOTAL_TIMEOUT" envDefault:"10s"`
	CircuitBreakerFailureRatio      string `env:"CIRCUIT_BREAKER_FAILURE_RATIO" envDefault:"0.5"`
	CircuitBreakerMinimumThroughput string `env:"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT" envDefault:"5"`
	CircuitBreakerSamplingDuration  string `env:"CIRCUIT_BREAKER_SAMPLING_DURATION" envDefault:"30s"`
	CircuitBreakerBreakDuration     string `env:"CIRCUIT_BREAKER_BREAK_DURATION" envDefault:"15s"`
	ConcurrencyLimit                string `env:"CONCURRENCY_LIMIT" envDefault:"4"`
}

func convertResilience(c *converter, raw rawResilience) Resilience {
	return Resilience{
		MailboxSessionEstablishment:       convertBudget(c, ResilienceMailboxSessionEstablishment, rawBudget(raw.MailboxSessionEstablishment)),
		MailboxDataRetrieval:              convertBudget(c, ResilienceMailboxDataRetrieval, rawBudget(raw.MailboxDataRetrieval)),
		EmailDelivery:                     convertBudget(c, ResilienceEmailDelivery, rawBudget(raw.EmailDelivery)),
		DatabaseCommandExecution:          convertBudget(c, ResilienceDatabaseCommandExecution, rawBudget(raw.DatabaseCommandExecution)),
		AiProviderInvocation:              convertBudget(c, ResilienceAiProviderInvocation, rawBudget(raw.AiProviderInvocation)),
		MailAuthorizationServerInvocation: convertBudget(c, ResilienceMailAuthorizationServerInvocation, rawBudget(raw.MailAuthorizationServerInvocation)),
	}
}

// Ranges of the resilience settings.
const (
	resilienceMaxAttempts    = 20
	resilienceMaxCount       = 10000
	resilienceMinDuration    = time.Millisecond
	resilienceMaxDelay       = time.Hour
	resilienceMaxTimeLimit   = 24 * time.Hour
	resilienceSectionPrefix  = Prefix + "RESILIENCE_"
	resilienceRatioViolation = "must be a number greater than 0 and at most 1, such as 0.5"
)

func convertBudget(c *converter, class ResilienceClass, raw rawBudget) ResilienceBudget {
	p := resilienceSectionPrefix + class.VariablePart() + "_"
	b := ResilienceBudget{
		MaxAttempts:                     c.integer(p+"MAX_ATTEMPTS", raw.MaxAttempts, 1, resilienceMaxAttempts),
		BaseDelay:                       c.duration(p+"BASE_DELAY", raw.BaseDelay, resilienceMinDuration, resilienceMaxDelay),
		MaxDelay:                        c.duration(p+"MAX_DELAY", raw.MaxDelay, resilienceMinDuration, resilienceMaxDelay),
		AttemptTimeout:                  c.duration(p+"ATTEMPT_TIMEOUT", raw.AttemptTimeout, resilienceMinDuration, resilienceMaxTimeLimit),
		TotalTimeout:                    c.duration(p+"TOTAL_TIMEOUT", raw.TotalTimeout, resilienceMinDuration, resilienceMaxTimeLimit),
		CircuitBreakerFailureRatio:      c.ratio(p+"CIRCUIT_BREAKER_FAILURE_RATIO", raw.CircuitBreakerFailureRatio),
		CircuitBreakerMinimumThroughput: c.integer(p+"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT", raw.CircuitBreakerMinimumThroughput, 1, resilienceMaxCount),
		CircuitBreakerSamplingDuration:  c.duration(p+"CIRCUIT_BREAKER_SAMPLING_DURATION", raw.CircuitBreakerSamplingDuration, resilienceMinDuration, resilienceMaxTimeLimit),
		CircuitBreakerBreakDuration:     c.duration(p+"CIRCUIT_BREAKER_BREAK_DURATION", raw.CircuitBreakerBreakDuration, resilienceMinDuration, resilienceMaxTimeLimit),
		ConcurrencyLimit:                c.integer(p+"CONCURRENCY_LIMIT", raw.ConcurrencyLimit, 1, resilienceMaxCount),
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
	parts := make([]string, len(ResilienceClasses))
	for i, class := range ResilienceClasses {
		parts[i] = class.VariablePart()
		if strings.HasPrefix(rest, parts[i]+"_") {
			return ": " + strings.TrimPrefix(rest, parts[i]+"_") + " is not a setting of " + string(class) +
				"; settings are " + strings.Join(ResilienceSettings, ", ")
		}
	}
	return ": it names no dependency class; " + resilienceSectionPrefix + "<CLASS>_<SETTING> takes a CLASS of " + strings.Join(parts, ", ")
}
