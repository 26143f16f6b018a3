package imapx

import (
	"strings"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// PolicyViolationError reports an endpoint whose transport security policy
// breaks a rule configuration already enforces at startup. The adapter is
// handed its policy and checks it again before it connects, so no code path
// that builds an endpoint some other way can open a connection the
// operator's rules refuse. Rule is the violation identity, one of the
// Rule… constants. It is terminal.
type PolicyViolationError struct {
	Rule   string
	Reason string
}

func (e *PolicyViolationError) Error() string {
	return failure.Text("imapx: "+e.Reason, e.Rule)
}

// Identity implements failure.Named: the violated rule.
func (e *PolicyViolationError) Identity() string { return e.Rule }

// The transport-security rule identities the adapter reports.
// Configuration refuses the same violations at startup under the same
// identities, in brackets after the problem; a mode it does not know it
// reports as a value that does not parse, without an identity.
const (
	// RuleConnectionSecurityUnknown: a connection-security mode that is not
	// one of the five.
	RuleConnectionSecurityUnknown = "ConnectionSecurityUnknown"
	// RuleUnencryptedConnectionRequiresExplicitOptIn: a mode that can stay
	// unencrypted without the AllowInsecureConnection opt-in
	// (ALLOW_INSECURE_CONNECTION).
	RuleUnencryptedConnectionRequiresExplicitOptIn = "UnencryptedConnectionRequiresExplicitOptIn"
	// RuleClearTextAuthenticationRequiresExplicitOptIn: PLAIN or LOGIN
	// permitted on a mode that can stay unencrypted without the
	// AllowClearTextOverUnencrypted opt-in
	// (ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION).
	RuleClearTextAuthenticationRequiresExplicitOptIn = "ClearTextAuthenticationRequiresExplicitOptIn"
	// RuleAuthenticationMechanismNotSupported: an allow-list naming a
	// mechanism internal/sasl does not implement (sasl.Unimplemented:
	// DIGEST-MD5, NTLM, every -PLUS variant). It is refused rather than
	// skipped, because skipping it would let the allow-list quietly mean
	// the weaker mechanisms it also names.
	RuleAuthenticationMechanismNotSupported = "AuthenticationMechanismNotSupported"
)

// checkPolicy applies the transport-security rules that concern a
// connection (RFC 8314 §4 prefers implicit TLS; everything weaker is an
// explicit opt-in): every permitted mechanism must be one internal/sasl
// implements, a mode that can complete unencrypted needs
// AllowInsecureConnection, and permitting PLAIN or LOGIN on such a mode
// also needs AllowClearTextOverUnencrypted. It deliberately does not judge
// trust anchors, which are loaded before an endpoint exists; a TLS
// configuration that skips verification is refused where TLS is set up.
func (ep Endpoint) checkPolicy() error {
	for _, m := range ep.PermittedMechanisms {
		if !sasl.Implemented(m) {
			return &PolicyViolationError{Rule: RuleAuthenticationMechanismNotSupported,
				Reason: "the allow-list names a mechanism this client does not implement; supported are " + supportedMechanisms()}
		}
	}
	security := ep.Security
	if security == "" {
		security = TLSOnConnect
	}
	switch security {
	case TLSOnConnect, StartTLSRequired, StartTLSWhenAvailable, Auto, None:
	default:
		return &PolicyViolationError{Rule: RuleConnectionSecurityUnknown, Reason: "the connection-security mode is not one of TlsOnConnect, StartTlsRequired, StartTlsWhenAvailable, Auto, None"}
	}
	if !security.CanStayUnencrypted() {
		return nil
	}
	if !ep.AllowInsecureConnection {
		return &PolicyViolationError{Rule: RuleUnencryptedConnectionRequiresExplicitOptIn,
			Reason: "a connection that can stay unencrypted requires AllowInsecureConnection"}
	}
	permitted := ep.PermittedMechanisms
	if len(permitted) == 0 {
		permitted = defaultPermitted
	}
	for _, m := range permitted {
		if m.ClearText() && !ep.AllowClearTextOverUnencrypted {
			return &PolicyViolationError{Rule: RuleClearTextAuthenticationRequiresExplicitOptIn,
				Reason: "permitting PLAIN or LOGIN on a connection that can stay unencrypted requires AllowClearTextAuthenticationOverUnencryptedConnection"}
		}
	}
	return nil
}

// supportedMechanisms lists sasl.Mechanisms for a refusal's text.
func supportedMechanisms() string {
	names := make([]string, len(sasl.Mechanisms))
	for i, m := range sasl.Mechanisms {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}
