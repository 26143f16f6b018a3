package sasl

// Mechanism is a SASL mechanism by its registered name (RFC 4422 §3.1),
// which is also how an account's allow-list configures it and how it is
// serialized. Names are upper case; every function of this package that
// takes a Mechanism matches it ignoring case.
type Mechanism string

// The registered mechanisms MailFathom knows by name: those it implements
// (Mechanisms), which an allow-list may name, and those it does not
// (Unimplemented), which configuration refuses.
const (
	Plain           Mechanism = "PLAIN"
	Login           Mechanism = "LOGIN"
	CramMD5         Mechanism = "CRAM-MD5"
	DigestMD5       Mechanism = "DIGEST-MD5"
	ScramSHA1       Mechanism = "SCRAM-SHA-1"
	ScramSHA1Plus   Mechanism = "SCRAM-SHA-1-PLUS"
	ScramSHA256     Mechanism = "SCRAM-SHA-256"
	ScramSHA256Plus Mechanism = "SCRAM-SHA-256-PLUS"
	ScramSHA512     Mechanism = "SCRAM-SHA-512"
	ScramSHA512Plus Mechanism = "SCRAM-SHA-512-PLUS"
	NTLM            Mechanism = "NTLM"
	XOAuth2         Mechanism = "XOAUTH2"
	OAuthBearer     Mechanism = "OAUTHBEARER"
)

// Mechanisms lists every mechanism this package implements, which is every
// name an account's allow-list may hold, in documentation order.
var Mechanisms = []Mechanism{
	Plain, Login, CramMD5, ScramSHA1, ScramSHA256, ScramSHA512, XOAuth2, OAuthBearer,
}

// Unimplemented lists the registered mechanisms this package does not
// implement: DIGEST-MD5 (historic, RFC 6331), NTLM, and every channel-bound
// -PLUS variant of SCRAM. An allow-list naming one is refused where it is
// configured (imapx.RuleAuthenticationMechanismNotSupported) rather than
// skipped where a connection authenticates: skipped, an allow-list of
// "SCRAM-SHA-256-PLUS,PLAIN" would quietly mean PLAIN, a downgrade nobody
// sees.
var Unimplemented = []Mechanism{
	DigestMD5, ScramSHA1Plus, ScramSHA256Plus, ScramSHA512Plus, NTLM,
}

// ClearText reports whether m hands over the reusable password itself:
// PLAIN or LOGIN.
func (m Mechanism) ClearText() bool { return m == Plain || m == Login }

// Token reports whether m carries an OAuth 2.0 bearer token rather than a
// password: XOAUTH2, or OAUTHBEARER (RFC 7628).
func (m Mechanism) Token() bool { return m == XOAuth2 || m == OAuthBearer }
