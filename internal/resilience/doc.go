// Package resilience is MailFathom's one model for calling a dependency it
// does not control: IMAP servers, PostgreSQL, embedding providers, and
// OAuth authorization servers. It is generic: it knows no adapter's
// errors. Each adapter hands NewRegistry the Classifier of its protocol
// family (package outbound assembles them).
//
// # Dependency classes and pipelines
//
// Resilience is configured per DependencyClass, a closed enumeration: a
// class that is not declared resolves no pipeline and is an error
// (ErrUndeclaredClass), never "no resilience". A Registry keeps one pipeline
// per Key — a class and the remote instance it talks to (an account id, an
// endpoint alias, or SharedInstance for the local database) — built lazily
// from the class's Budget and cached, so an unreachable server opens the
// circuit for its own instance only. From outermost to innermost a pipeline
// is:
//
//  1. concurrency limiter: beyond ConcurrencyLimit in flight, an execution
//     is rejected at once, never queued;
//  2. total timeout: bounds the whole operation, backoff waits included;
//  3. retry: exponential backoff with jitter, capped by MaxDelay, MaxAttempts
//     counting the first call (1 disables retry);
//  4. circuit breaker: opens when the failure ratio over a sliding sampling
//     window reaches CircuitBreakerFailureRatio with at least
//     CircuitBreakerMinimumThroughput attempts, rejects for
//     CircuitBreakerBreakDuration, then lets one trial call through;
//  5. per-attempt timeout: cancels the attempt's context, which makes a
//     stalled attempt a repeatable failure.
//
// The strategies are failsafe-go's. Its retry policy repeats every error by
// default; here it repeats only what the class's family Classifier calls
// transient (an abandoned attempt is shown to it as ErrAttemptTimeout), and
// never a circuit-open or limiter rejection.
//
// # What the caller sees
//
//   - Success: nil.
//   - A limit the pipeline imposed — limiter full, circuit open, the total
//     timeout expiring inside an attempt, an attempt timeout that ended the
//     last attempt — is one *DependencyUnavailableError naming the class
//     and instance and wrapping failsafe-go's rejection. It never carries
//     text from the failure.
//   - The total timeout expiring while the pipeline waits to retry stops the
//     retry and surfaces the failure that ended the last attempt.
//   - An exhausted retry returns the last failure untranslated; a terminal
//     failure returns at once, untranslated. An adapter that wants a
//     surviving transient failure to read as "unavailable" says so itself
//     (the IMAP adapter maps it to MailboxUnavailable).
//   - The caller's own cancellation stays context.Canceled (or the caller's
//     own deadline error): never translated, never transient.
//   - A failure that declares its budget spent (BudgetSpent: a
//     *DependencyUnavailableError, or an adapter's translation of a failure
//     that survived its own pipeline) is never repeated by an enclosing
//     pipeline of another class, whatever its cause: the call was retried
//     at one layer already.
//
// # The single-layer rule
//
// One logical operation is retried at exactly one layer. Execute marks its
// class in the context for the duration of the execution; executing the
// same class again on that context fails immediately with
// ErrNestedSameClass. Different classes nest.
//
// # Telemetry and privacy
//
// Metrics (registered on the Registerer given to NewRegistry) and log lines
// carry the class, the instance, the operation (a folder alias or
// OperationFolderDiscovery), the failure's Go type name, the attempt number
// and the delay — never an error message, an address, server text or a
// payload. The instance and the operation are deployment vocabulary the
// caller chooses; they must never be taken from mail.
package resilience
