package config

import (
	"net"
	"net/url"
	"strings"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// OAuth is an account's OAuth block, MAILFATHOM_ACCOUNTS_<i>_OAUTH_*: where
// a token account obtains the access token XOAUTH2 and OAUTHBEARER
// (RFC 7628) carry instead of a password. The token is obtained by
// exchanging the refresh token at the token endpoint (the refresh_token
// grant, RFC 6749 §6). An account configures the block exactly when its
// allow-list permits only token mechanisms (TransportSecurity.TokenOnly);
// Load refuses either shape without the other.
type OAuth struct {
	// TokenEndpoint is MAILFATHOM_ACCOUNTS_<i>_OAUTH_TOKEN_ENDPOINT, the
	// authorization server's token endpoint (RFC 6749 §3.2): an absolute
	// https:// URL, or http:// for a loopback host only, without user
	// information or fragment. A query component is kept.
	TokenEndpoint string
	// ClientID is MAILFATHOM_ACCOUNTS_<i>_OAUTH_CLIENT_ID, a secret
	// reference to the client identifier (RFC 6749 §2.2).
	ClientID secret.Reference
	// ClientSecret is MAILFATHOM_ACCOUNTS_<i>_OAUTH_CLIENT_SECRET, a secret
	// reference to the client password (RFC 6749 §2.3.1).
	ClientSecret secret.Reference
	// RefreshToken is MAILFATHOM_ACCOUNTS_<i>_OAUTH_REFRESH_TOKEN, a secret
	// reference to the refresh token the grant is exchanged with.
	RefreshToken secret.Reference
	// Scope is MAILFATHOM_ACCOUNTS_<i>_OAUTH_SCOPE, the scope requested
	// with every refresh (RFC 6749 §3.3): scope tokens separated by single
	// spaces, or empty to request none and keep the grant's own.
	Scope string
}

// IsZero reports whether no OAuth block is configured.
func (o OAuth) IsZero() bool { return o == OAuth{} }

// The credential-shape rule identities, appended in brackets like the
// transport-security ones: which credential an account needs is settled by
// its allow-list, not by which blocks happen to be present.
const (
	// RuleOAuthRequired: an allow-list of only XOAUTH2 and/or OAUTHBEARER
	// without an OAuth block.
	RuleOAuthRequired = "OAuthRequired"
	// RuleOAuthIncomplete: an OAuth block lacking one of its required
	// settings; reported once per missing setting.
	RuleOAuthIncomplete = "OAuthIncomplete"
	// RuleOAuthNotExpected: an OAuth block on an account whose allow-list
	// permits a password mechanism.
	RuleOAuthNotExpected = "OAuthNotExpected"
	// RulePasswordNotExpected: a password on an account whose allow-list
	// permits only token mechanisms.
	RulePasswordNotExpected = "PasswordNotExpected"
)

type rawOAuth struct {
	TokenEndpoint string `env:"OAUTH_TOKEN_ENDPOINT"`
	ClientID      string `env:"OAUTH_CLIENT_ID"`
	ClientSecret  string `env:"OAUTH_CLIENT_SECRET"`
	RefreshToken  string `env:"OAUTH_REFRESH_TOKEN"`
	Scope         string `env:"OAUTH_SCOPE"`
}

func (r rawOAuth) isZero() bool { return r == rawOAuth{} }

// oauthSetting names one setting of the block for the rules below.
type oauthSetting struct {
	name  string // variable suffix
	what  string // what the operator must supply, in a sentence
	value string
}

func (r rawOAuth) required() []oauthSetting {
	return []oauthSetting{
		{"OAUTH_TOKEN_ENDPOINT", "a token endpoint", r.TokenEndpoint},
		{"OAUTH_CLIENT_ID", "a secret reference to the client ID", r.ClientID},
		{"OAUTH_CLIENT_SECRET", "a secret reference to the client secret", r.ClientSecret},
		{"OAUTH_REFRESH_TOKEN", "a secret reference to the refresh token", r.RefreshToken},
	}
}

// convertOAuth converts account i's OAuth block, checking the syntax of
// whatever is set; which shape the account needs is convertCredential's
// rule.
func convertOAuth(c *converter, i int, label string, raw rawOAuth) OAuth {
	v := func(name string) string { return accountVar(i, name) }
	var o OAuth
	if raw.TokenEndpoint != "" {
		o.TokenEndpoint = convertTokenEndpoint(c, v("OAUTH_TOKEN_ENDPOINT"), label, raw.TokenEndpoint)
	}
	o.ClientID = c.reference(v("OAUTH_CLIENT_ID"), raw.ClientID)
	o.ClientSecret = c.reference(v("OAUTH_CLIENT_SECRET"), raw.ClientSecret)
	o.RefreshToken = c.reference(v("OAUTH_REFRESH_TOKEN"), raw.RefreshToken)
	if raw.Scope != "" {
		o.Scope = convertScope(c, v("OAUTH_SCOPE"), label, raw.Scope)
	}
	return o
}

// convertCredential enforces that the account configures the credential
// its allow-list needs and no other: a password when any password mechanism
// is permitted, an OAuth block when only token mechanisms are. It runs only
// when the allow-list converted, since a partly parsed list would name the
// wrong credential.
func convertCredential(c *converter, i int, label string, tokenOnly bool, password string, raw rawOAuth) {
	v := func(name string) string { return accountVar(i, name) }
	if !tokenOnly {
		if password == "" {
			c.add(v("PASSWORD"), "%s: a password secret reference is required for every configured account whose allow-list permits a password mechanism, even while synchronization is disabled (remove the account instead)", label)
		}
		if !raw.isZero() {
			first := "OAUTH_SCOPE"
			for _, s := range raw.required() {
				if s.value != "" {
					first = s.name
					break
				}
			}
			c.addRule(v(first), RuleOAuthNotExpected,
				"%s: An OAuth block is configured, but the allow-list permits a password mechanism, so the account authenticates with its password; permit only XOAUTH2 and/or OAUTHBEARER, or remove the OAuth block.", label)
		}
		return
	}
	if password != "" {
		c.addRule(v("PASSWORD"), RulePasswordNotExpected,
			"%s: An allow-list of only XOAUTH2 and/or OAUTHBEARER authenticates with an access token and takes no password; remove it, or permit a password mechanism.", label)
	}
	if raw.isZero() {
		c.addRule(v("OAUTH_TOKEN_ENDPOINT"), RuleOAuthRequired,
			"%s: An allow-list of only XOAUTH2 and/or OAUTHBEARER requires an OAuth block: OAUTH_TOKEN_ENDPOINT, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET and OAUTH_REFRESH_TOKEN.", label)
		return
	}
	for _, s := range raw.required() {
		if s.value == "" {
			c.addRule(v(s.name), RuleOAuthIncomplete, "%s: The OAuth block is incomplete: it needs %s too.", label, s.what)
		}
	}
}

// convertTokenEndpoint checks the token endpoint URL (RFC 6749 §3.2): it
// must be absolute and carry no fragment, it is refused with user
// information (client credentials belong in their own references), and it
// must use TLS unless it names a loopback host, because the request carries
// the client secret and the refresh token. The value is never echoed.
func convertTokenEndpoint(c *converter, variable, label, raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" || u.Fragment != "" || strings.Contains(raw, "#"):
		c.add(variable, "%s: the token endpoint must be an absolute https:// URL without a fragment", label)
	case u.User != nil:
		c.add(variable, "%s: the token endpoint must not carry user information; the client's credentials are OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET", label)
	case u.Scheme == "https":
		return raw
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return raw
	case u.Scheme == "http":
		c.add(variable, "%s: the token endpoint must use https://; http:// is accepted only for a loopback host (localhost, 127.0.0.0/8, ::1), because the request carries the client secret and the refresh token", label)
	default:
		c.add(variable, "%s: the token endpoint must be an absolute https:// URL without a fragment", label)
	}
	return ""
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// convertScope normalizes the scope to tokens separated by single spaces
// and checks each token's characters (RFC 6749 §3.3: %x21 / %x23-5B /
// %x5D-7E).
func convertScope(c *converter, variable, label, raw string) string {
	tokens := strings.Fields(raw)
	for _, tok := range tokens {
		for i := 0; i < len(tok); i++ {
			b := tok[i]
			if b < 0x21 || b > 0x7e || b == '"' || b == '\\' {
				c.add(variable, `%s: the scope must be scope tokens separated by spaces, each of printable ASCII characters other than '"' and '\' (RFC 6749 §3.3)`, label)
				return ""
			}
		}
	}
	return strings.Join(tokens, " ")
}
