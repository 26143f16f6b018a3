package sasl

import (
	"strings"
)

// strength lists every mechanism this package knows by name, strongest
// first, the unimplemented ones included so that a Situation naming one
// (which configuration and imapx refuse before it gets here) still reads
// sensibly. The configured order of the allow-list plays no part: the
// strongest permitted mechanism the server offers wins.
//
// SCRAM (RFC 5802) ranks first: the server never sees the password and
// proves it knows it, and a longer hash ranks higher; channel binding (-PLUS)
// ranks above the same hash without it. CRAM-MD5 (RFC 2195) and DIGEST-MD5
// (RFC 2831, historic by RFC 6331) keep the password off the wire but
// authenticate only the client, on MD5; NTLM is weaker still. The bearer
// mechanisms carry a token instead of a password and are only ever chosen
// for a token account, OAUTHBEARER (the registered RFC 7628) before the
// proprietary XOAUTH2. PLAIN and LOGIN hand over the password itself, PLAIN
// first as the standard one (RFC 4616).
var strength = []Mechanism{
	ScramSHA512Plus, ScramSHA512,
	ScramSHA256Plus, ScramSHA256,
	ScramSHA1Plus, ScramSHA1,
	CramMD5, DigestMD5, NTLM,
	OAuthBearer, XOAuth2,
	Plain, Login,
}

// implemented are the mechanisms NewClient can build, Mechanisms. Only
// these are ever chosen; a permitted and advertised mechanism outside it is
// passed over as if the server had not offered it.
var implemented = func() map[Mechanism]struct{} {
	m := make(map[Mechanism]struct{}, len(Mechanisms))
	for _, name := range Mechanisms {
		m[name] = struct{}{}
	}
	return m
}()

// Implemented reports whether this package can authenticate with m.
func Implemented(m Mechanism) bool {
	_, ok := implemented[Mechanism(strings.ToUpper(string(m)))]
	return ok
}

// Choice is how a connection authenticates: with AUTHENTICATE and a SASL
// mechanism, or with the IMAP LOGIN command (RFC 9051 §6.2.3), which hands
// over the password in clear text.
type Choice struct {
	// Mechanism is the SASL mechanism for AUTHENTICATE; empty when
	// LoginCommand is set.
	Mechanism Mechanism
	// LoginCommand is the clear-text fallback: the LOGIN command instead of
	// AUTHENTICATE.
	LoginCommand bool
}

// String returns the mechanism's name, or "LOGIN command".
func (c Choice) String() string {
	if c.LoginCommand {
		return "LOGIN command"
	}
	return string(c.Mechanism)
}

// Situation is everything the choice depends on: the account's policy and
// what the server and the connection are now.
type Situation struct {
	// Permitted is the account's allow-list
	// (TransportSecurity.PermittedAuthenticationMechanisms). Its order is
	// ignored and names match ignoring case.
	Permitted []Mechanism
	// Advertised are the mechanisms of the server's AUTH= capabilities,
	// with or without the "AUTH=" prefix, matched ignoring case, as
	// imap.CapSet's AuthMechanisms returns them.
	Advertised []string
	// LoginDisabled is whether the server advertises LOGINDISABLED
	// (RFC 9051 §6.2.3), which rules out the LOGIN command.
	LoginDisabled bool
	// CanStayUnencrypted is whether the account's connection-security mode
	// is one that can complete without encryption (StartTlsWhenAvailable,
	// Auto, None): only such a mode can permit clear text over a connection
	// that is not encrypted. The modes themselves are the adapter's
	// (imapx.ConnectionSecurity); this is all the choice needs of them.
	CanStayUnencrypted bool
	// AllowClearTextOverUnencrypted is the policy's
	// AllowClearTextAuthenticationOverUnencryptedConnection opt-in.
	AllowClearTextOverUnencrypted bool
	// Encrypted is whether this connection is protected by TLS now
	// (implicit TLS or a completed STARTTLS).
	Encrypted bool
	// TokenAccount is whether the account authenticates with a bearer
	// token (its allow-list permits only XOAUTH2 and/or OAUTHBEARER and it
	// configures an OAuth block). A password account never chooses a token
	// mechanism, a token account chooses nothing else and never falls back
	// to the LOGIN command.
	TokenAccount bool
}

// Choose returns how to authenticate in s; see Situation.Choose.
func Choose(permitted []Mechanism, advertised []string, loginDisabled bool,
	canStayUnencrypted bool, allowClearTextOverUnencrypted bool, encrypted bool, tokenAccount bool,
) (Choice, error) {
	return Situation{
		Permitted:                     permitted,
		Advertised:                    advertised,
		LoginDisabled:                 loginDisabled,
		CanStayUnencrypted:            canStayUnencrypted,
		AllowClearTextOverUnencrypted: allowClearTextOverUnencrypted,
		Encrypted:                     encrypted,
		TokenAccount:                  tokenAccount,
	}.Choose()
}

// Choose narrows the advertised mechanisms to the permitted ones and
// returns the strongest survivor by the fixed strength order, whatever the
// order of the allow-list. A survivor must also be implemented by this
// package, fit the account (token or password) and, if it is clear text
// (PLAIN, LOGIN) on a connection that is not encrypted, be allowed there:
// the mode must be one that can stay unencrypted and
// AllowClearTextOverUnencrypted must be set.
//
// When nothing survives, the LOGIN command is the fallback (RFC 9051
// §6.2.3: a client's last resort when the server offers nothing usable)
// only if all of these hold:
//
//   - the account is a password account;
//   - the allow-list permits PLAIN or LOGIN, the mechanisms that already
//     hand over the password in clear text; an allow-list of
//     challenge-response mechanisms alone says the password must never
//     travel in clear text;
//   - the server does not advertise LOGINDISABLED;
//   - the connection is encrypted, or the mode can stay unencrypted and the
//     clear-text opt-in is set.
//
// Otherwise the result is a *MechanismUnavailableError
// (ErrMechanismUnavailable), decided before any credential is needed.
func (s Situation) Choose() (Choice, error) {
	permitted := make(map[Mechanism]bool, len(s.Permitted))
	for _, m := range s.Permitted {
		permitted[Mechanism(strings.ToUpper(string(m)))] = true
	}
	return s.choose(permitted, true)
}

// choose is Choose over a permitted set; fallback says whether the LOGIN
// command may stand in when nothing survives.
func (s Situation) choose(permitted map[Mechanism]bool, fallback bool) (Choice, error) {
	advertised := make(map[Mechanism]bool, len(s.Advertised))
	for _, a := range s.Advertised {
		a = strings.ToUpper(strings.TrimSpace(a))
		a = strings.TrimPrefix(a, "AUTH=")
		advertised[Mechanism(a)] = true
	}
	clearTextAllowed := s.Encrypted || s.CanStayUnencrypted && s.AllowClearTextOverUnencrypted

	offeredPermitted := false
	for _, m := range strength {
		if !permitted[m] || !advertised[m] {
			continue
		}
		offeredPermitted = true
		if !Implemented(m) || m.Token() != s.TokenAccount || m.ClearText() && !clearTextAllowed {
			continue
		}
		return Choice{Mechanism: m}, nil
	}

	if !fallback {
		return Choice{}, ErrNoMechanismLeft
	}
	var reason string
	switch {
	case s.TokenAccount && offeredPermitted:
		reason = "the server offers no permitted token mechanism this client implements"
	case s.TokenAccount:
		reason = "the server offers no permitted token mechanism"
	case !permitted[Plain] && !permitted[Login]:
		if offeredPermitted {
			reason = "the server offers no permitted mechanism this client implements, and the allow-list permits no clear-text mechanism for the LOGIN command"
		} else {
			reason = "the server offers no permitted mechanism, and the allow-list permits no clear-text mechanism for the LOGIN command"
		}
	case s.LoginDisabled:
		reason = "the server offers no permitted mechanism and refuses the LOGIN command (LOGINDISABLED)"
	case !clearTextAllowed:
		reason = "the connection is not encrypted and the policy does not allow clear-text authentication over it"
	default:
		return Choice{LoginCommand: true}, nil
	}
	return Choice{}, &MechanismUnavailableError{Reason: reason}
}
