package sasl

import (
	"errors"
	"strings"
)

// Negotiator keeps one session's narrowed mechanism set across attempts.
// It starts from the mechanisms both permitted and advertised; After removes
// a failed one, and nothing ever adds one back, so neither a failure nor a
// server can bring back a mechanism the operator refused or one that has
// already failed.
//
// Whether to try again after a failure at all is the caller's policy, and
// normally it does not: a server that rejects a credential with one
// mechanism rejects it with the others, and trying them only hands the
// password to the server in weaker forms. The Negotiator is for the
// failures that are about the mechanism rather than the credential, for
// example a SCRAM iteration count out of bounds. A failure showing that the
// server cannot prove its identity (ErrServerSignatureMismatch,
// ErrServerNotVerified) ends the session: After then makes every later Next
// return that error, so no weaker mechanism follows it.
//
// The LOGIN-command fallback is only offered on the first Next, when the
// server offered nothing usable to begin with; once a SASL mechanism has
// been tried, the server has answered, and running out of mechanisms is
// ErrNoMechanismLeft. A Negotiator is not safe for concurrent use.
type Negotiator struct {
	s         Situation
	remaining map[Mechanism]bool
	tried     bool // a mechanism or the LOGIN command has failed
	ended     error
}

// NewNegotiator narrows s's advertised mechanisms to the permitted ones.
func NewNegotiator(s Situation) *Negotiator {
	advertised := make(map[Mechanism]bool, len(s.Advertised))
	for _, a := range s.Advertised {
		a = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(a)), "AUTH=")
		advertised[Mechanism(a)] = true
	}
	n := &Negotiator{s: s, remaining: map[Mechanism]bool{}}
	for _, m := range s.Permitted {
		m = Mechanism(strings.ToUpper(string(m)))
		if advertised[m] {
			n.remaining[m] = true
		}
	}
	return n
}

// Next returns how to authenticate next: the strongest remaining mechanism,
// the LOGIN command under Choose's fallback rules on the first call, a
// *MechanismUnavailableError when the first call has neither, or
// ErrNoMechanismLeft when every mechanism tried has failed.
func (n *Negotiator) Next() (Choice, error) {
	if n.ended != nil {
		return Choice{}, n.ended
	}
	if n.tried {
		return n.s.choose(n.remaining, false)
	}
	// The first attempt is Choose itself: the allow-list as configured
	// decides the fallback, and narrowing it to the advertised set gives
	// the same mechanism as n.remaining.
	return n.s.Choose()
}

// After records that failed did not authenticate, for the reason cause
// (what Authenticate or the LOGIN command returned). A failed mechanism is
// removed for good; a failed LOGIN command is not offered again. A cause
// that is ErrServerSignatureMismatch or ErrServerNotVerified ends the
// negotiation.
func (n *Negotiator) After(failed Choice, cause error) {
	if errors.Is(cause, ErrServerSignatureMismatch) || errors.Is(cause, ErrServerNotVerified) {
		n.ended = cause
		return
	}
	if failed.LoginCommand {
		n.tried = true
		return
	}
	if failed.Mechanism == "" {
		return
	}
	delete(n.remaining, Mechanism(strings.ToUpper(string(failed.Mechanism))))
	n.tried = true
}

// Remaining returns the mechanisms still in the narrowed set, strongest
// first, including permitted ones this package does not implement.
func (n *Negotiator) Remaining() []Mechanism {
	var out []Mechanism
	for _, m := range strength {
		if n.remaining[m] {
			out = append(out, m)
		}
	}
	return out
}
