package dovecot

import (
	"strings"

	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// DefaultAuthMechanisms are the SASL mechanisms a server offers unless
// WithAuthMechanisms says otherwise.
var DefaultAuthMechanisms = []string{"plain", "login", "cram-md5", "scram-sha-1", "scram-sha-256"}

// Option changes the configuration Start generates.
type Option func(*options)

type options struct {
	capability       string
	noListIndex      bool
	authMechanisms   []string
	extra            []string
	noSTARTTLS       bool
	debug            bool
	plaintextAllowed bool
	ca               *testca.Bundle
	cert             *testca.Leaf
}

func defaultOptions() options {
	return options{authMechanisms: DefaultAuthMechanisms}
}

// WithCapability sets Dovecot's imap_capability, replacing the capability
// list the server advertises both before login (where Dovecot still adds
// STARTTLS, LOGINDISABLED and the AUTH= mechanisms) and after it, for
// example "IMAP4rev1 IDLE". A value starting with "+" appends to the default
// list instead.
//
// This changes only what is advertised, not what Dovecot does: measured on
// 2.3.19 with "IMAP4rev1 IDLE", the server still answers ENABLE QRESYNC
// CONDSTORE with "* ENABLED QRESYNC CONDSTORE", SELECT (CONDSTORE) with
// HIGHESTMODSEQ, and NOTIFY commands. Tests of a client's fallback must
// therefore rely on the client honouring the advertised list.
func WithCapability(capability string) Option {
	return func(o *options) { o.capability = capability }
}

// WithoutMailboxListIndex sets mailbox_list_index = no. Dovecot then stops
// advertising NOTIFY (the command itself still works) and answers STATUS
// from the mailbox indexes instead of the list index.
func WithoutMailboxListIndex() Option {
	return func(o *options) { o.noListIndex = true }
}

// WithAuthMechanisms sets auth_mechanisms, for example "plain" or
// "scram-sha-256". Mechanism names are Dovecot's, case-insensitive.
func WithAuthMechanisms(mechanisms ...string) Option {
	return func(o *options) { o.authMechanisms = mechanisms }
}

// WithExtraConfig appends conf verbatim to the generated dovecot.conf, after
// every generated setting, so a top-level setting given here overrides the
// generated one. Several calls append in order.
func WithExtraConfig(conf string) Option {
	return func(o *options) { o.extra = append(o.extra, conf) }
}

// WithoutSTARTTLS makes the plain listener offer no STARTTLS (the command
// is answered "BAD TLS support isn't enabled"), while TLSAddr keeps serving
// implicit TLS.
//
// Dovecot 2.3 picks its ssl setting per local IP address only, not per
// listener or port, so the plain listener then binds 127.0.0.3 and the
// configuration adds `local 127.0.0.3 { ssl = no }`. A client on 127.0.0.1
// dialing 127.0.0.3 is not secured in Dovecot's sense, so it also sees
// LOGINDISABLED unless WithPlaintextAuth is given too.
func WithoutSTARTTLS() Option {
	return func(o *options) { o.noSTARTTLS = true }
}

// WithPlaintextAuth sets disable_plaintext_auth = no, so plaintext LOGIN and
// AUTHENTICATE PLAIN work on unencrypted connections from any address.
func WithPlaintextAuth() Option {
	return func(o *options) { o.plaintextAllowed = true }
}

// WithDebugLog sets auth_debug and mail_debug, which log every passdb and
// userdb lookup and mail storage decision. It is noisy; the default log
// already records each login with its SASL mechanism (auth_verbose = yes).
func WithDebugLog() Option {
	return func(o *options) { o.debug = true }
}

func (o options) mechanisms() string {
	return strings.Join(o.authMechanisms, " ")
}

// WithCA makes the server use b instead of a new bundle: b.Server is its
// certificate (unless WithCertificate is given too) and CA returns b. Use it
// to share one CA between a server and other parts of a test.
func WithCA(b *testca.Bundle) Option {
	return func(o *options) { o.ca = b }
}

// WithCertificate makes the server present leaf, with its intermediates
// (leaf.ChainPEM), instead of the CA's server certificate, for example
// s.CA().WrongNameServer() or testca.New().Server from an unrelated CA, to
// test how a client handles a certificate it must reject. CA still returns
// the bundle (see WithCA), whose pool then may not verify leaf. The harness's
// own helpers do not use TLS, so they keep working.
func WithCertificate(leaf *testca.Leaf) Option {
	return func(o *options) { o.cert = leaf }
}
