package cyrus

import "github.com/mailfathom/mailfathom/internal/testharness/testca"

// DefaultAuthMechanisms are the SASL mechanisms a server offers (its
// sasl_mech_list), all checked against the users' sasldb entries.
var DefaultAuthMechanisms = []string{"PLAIN", "LOGIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"}

// Option changes the configuration Start generates.
type Option func(*options)

type options struct {
	authMechanisms []string
	suppressed     []string
	ca             *testca.Bundle
}

func defaultOptions() options {
	return options{authMechanisms: DefaultAuthMechanisms}
}

// WithoutCapabilities sets Cyrus's suppress_capabilities: the named
// capabilities (exact case, for example "QRESYNC") are left out of every
// capability list the server sends, before and after login. As with
// Dovecot's WithCapability this changes what is advertised only; a client's
// fallback is tested by its honouring the list. COMPRESS=DEFLATE cannot be
// taken away: Cyrus adds it to any list.
func WithoutCapabilities(capabilities ...string) Option {
	return func(o *options) { o.suppressed = append(o.suppressed, capabilities...) }
}

// WithCA makes the server present b.Server and CA return b, instead of a
// new bundle: one CA for a server and other parts of a test.
func WithCA(b *testca.Bundle) Option {
	return func(o *options) { o.ca = b }
}
