package sasl

// Mechanism is a SASL mechanism by its registered name (RFC 4422 §3.1),
// which is also how an account's allow-list configures it and how it is
// serialized. Names are upper case; every function of this package that
// takes a Mechanism matches it ignoring case.
type Mechanism string

// The mechanisms an allow-list may name. Not all of them are implemented
// (see Implemented): a permitted mechanism this package cannot run is never
// chosen.
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

// Mechanisms lists every mechanism an allow-list may name, in
// documentation order.
var Mechanisms = []Mechanism{
	Plain, Login, CramMD5, DigestMD5, ScramSHA1, ScramSHA1Plus, ScramSHA256,
	ScramSHA256Plus, ScramSHA512, ScramSHA512Plus, NTLM, XOAuth2, OAuthBearer,
}

// ClearText reports whether m hands over the reusable password itself:
// PLAIN or LOGIN.
func (m Mechanism) ClearText() bool { return m == Plain || m == Login }

// Token reports whether m carries an OAuth 2.0 bearer token rather than a
// password: XOAUTH2, or OAUTHBEARER (RFC 7628).
func (m Mechanism) Token() bool { return m == XOAuth2 || m == OAuthBearer }
