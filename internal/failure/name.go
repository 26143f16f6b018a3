package failure

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Name returns the stable name err is reported under — in the log, in River
// UI, in a recorded outcome — and never its text, which may quote a value:
//
//   - the identity of the outermost failure in its chain that has one
//     (Identity);
//   - else what a namer registered with NameBy calls it: an adapter names
//     the failures of the library under it that carry no identity, as
//     internal/database does PostgreSQL's through pgx;
//   - else Timeout for a context's deadline;
//   - else the Go type of the first error in the chain that says more than
//     its cause: fmt.Errorf's wrapping, and a wrapper whose text is its
//     cause's, are looked through.
//
// nil has the name "". Name does not decide anything about a failure; the
// behaviour interfaces (RetryLater, BudgetSpent, …) do.
func Name(err error) string {
	if err == nil {
		return ""
	}
	if id, ok := Identity(err); ok {
		return id
	}
	namers.Lock()
	registered := namers.list
	namers.Unlock()
	for _, name := range registered {
		if id := name(err); id != "" {
			return id
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "Timeout"
	}
	for {
		next := errors.Unwrap(err)
		if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
			next = joined.Unwrap()[0]
		}
		if next == nil || !transparent(err, next) {
			return fmt.Sprintf("%T", err)
		}
		err = next
	}
}

// transparent reports whether err adds nothing to next but context: fmt's
// and errors' own wrappers, and a wrapper with its cause's text.
func transparent(err, next error) bool {
	switch fmt.Sprintf("%T", err) {
	case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		return true
	}
	return err.Error() == next.Error()
}

var namers struct {
	sync.Mutex
	list []func(error) string
}

// NameBy registers name for Name to ask about a failure with no identity:
// it returns the failure's name, or "" when it does not know it. An adapter
// registers one from its package's init, for the failures its library
// returns without an identity.
func NameBy(name func(error) string) {
	namers.Lock()
	defer namers.Unlock()
	namers.list = append(namers.list, name)
}
