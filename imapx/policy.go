package imapx

import (
	"github.com/mailfathom/mailfathom/internal/config"
)

// PolicyViolationError reports an endpoint whose transport security policy
// breaks a rule configuration already enforces at startup. The adapter is
// handed its policy and checks it again before it connects, so no code path
// that builds an endpoint some other way can open a connection the
// operator's rules refuse. Rule is the violation identity configuration
// uses (config.Rule…). It is terminal.
type PolicyViolationError struct {
	Rule   string
	Reason string
}

func (e *PolicyViolationError) Error() string {
	return "imapx: " + e.Reason + " [" + e.Rule + "]"
}

// RuleConnectionSecurityUnknown: a connection-security mode that is not one
// of the five.
const RuleConnectionSecurityUnknown = "ConnectionSecurityUnknown"

// checkPolicy applies the transport-security rules that concern a
// connection (RFC 8314 §4 prefers implicit TLS; everything weaker is an
// explicit opt-in): a mode that can complete unencrypted needs
// AllowInsecureConnection, and permitting PLAIN or LOGIN on such a mode
// also needs AllowClearTextOverUnencrypted. It deliberately does not judge
// trust anchors, which are loaded before an endpoint exists; a TLS
// configuration that skips verification is refused where TLS is set up.
func (ep Endpoint) checkPolicy() error {
	security := ep.Security
	if security == "" {
		security = TLSOnConnect
	}
	switch security {
	case TLSOnConnect, StartTLSRequired, StartTLSWhenAvailable, Auto, None:
	default:
		return &PolicyViolationError{Rule: RuleConnectionSecurityUnknown, Reason: "the connection-security mode is not one of TlsOnConnect, StartTlsRequired, StartTlsWhenAvailable, Auto, None"}
	}
	if !config.ConnectionSecurity(security).CanStayUnencrypted() {
		return nil
	}
	if !ep.AllowInsecureConnection {
		return &PolicyViolationError{Rule: config.RuleUnencryptedConnectionRequiresExplicitOptIn,
			Reason: "a connection that can stay unencrypted requires AllowInsecureConnection"}
	}
	permitted := ep.PermittedMechanisms
	if len(permitted) == 0 {
		permitted = defaultPermitted
	}
	for _, m := range permitted {
		if m.ClearText() && !ep.AllowClearTextOverUnencrypted {
			return &PolicyViolationError{Rule: config.RuleClearTextAuthenticationRequiresExplicitOptIn,
				Reason: "permitting PLAIN or LOGIN on a connection that can stay unencrypted requires AllowClearTextAuthenticationOverUnencryptedConnection"}
		}
	}
	return nil
}
