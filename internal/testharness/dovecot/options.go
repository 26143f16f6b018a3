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
	noCompress       bool
	authMechanisms   []string
	extra            []string
	noSTARTTLS       bool
	debug            bool
	plaintextAllowed bool
	ca               *testca.Bundle
	cert             *testca.Leaf
	oauth2URL        string
	loginReuse       bool
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

// WithoutCompression leaves out the imap_zlib plugin, which is what makes
// Dovecot offer COMPRESS=DEFLATE: the server neither advertises nor
// accepts COMPRESS. (WithCapability cannot take it away: the plugin adds
// it to any list.)
func WithoutCompression() Option {
	return func(o *options) { o.noCompress = true }
}

// WithLoginProcessReuse runs the login processes in Dovecot's
// high-performance mode, the one its documentation recommends for busy
// servers: `service imap-login { service_count = 0, process_min_avail = 2 }`,
// so that a few long-lived imap-login processes take every connection's
// TLS handshake and login instead of one new process per connection (the
// default, high-security mode). The mail process of each session (imap) is
// still one per session. It is for measurements of what a client costs a
// server: on a virtual machine where starting a process is dear, a new
// login process is most of what a session costs Dovecot (measured on the
// development machine: 70 ms of CPU per session without reuse, 30 ms with
// it).
func WithLoginProcessReuse() Option {
	return func(o *options) { o.loginReuse = true }
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

// OAuth2Mechanisms are the bearer-token mechanisms WithOAuth2 adds to
// auth_mechanisms and routes to the oauth2 passdb.
var OAuth2Mechanisms = []string{"xoauth2", "oauthbearer"}

// WithOAuth2 adds Dovecot's oauth2 passdb for the XOAUTH2 and OAUTHBEARER
// mechanisms, and adds both to auth_mechanisms unless WithAuthMechanisms
// names either of them, in which case its list is advertised as given (so
// a server can offer only one of them). Dovecot validates each bearer
// token by POSTing token=<token> to introspectionURL (introspection_mode =
// post, the RFC 7662 request) and admits the login when the JSON answer
// carries "active": true and a "username" equal to the user logging in
// (username_attribute = username, active_attribute = active,
// active_value = true). An inactive token is refused with
// AUTHENTICATIONFAILED after the mechanism's error challenge (RFC 7628
// §3.2.2). package oauthtest serves such an endpoint.
//
// The oauth2 passdb answers only those two mechanisms and ends their
// lookup (a refused token is not then tried as a passwd-file password);
// every other mechanism and the LOGIN command still use the users'
// passwords. The users themselves still come from AddUser or NewUser,
// whose userdb entry a token login needs too; their passwords are simply
// not used by it.
//
// Dovecot 2.3 needs no tokeninfo_url when introspection_url is set: it
// then introspects every token.
func WithOAuth2(introspectionURL string) Option {
	return func(o *options) { o.oauth2URL = introspectionURL }
}

func (o options) mechanisms() string {
	mechs := append([]string(nil), o.authMechanisms...)
	named := false
	for _, m := range OAuth2Mechanisms {
		named = named || containsFold(mechs, m)
	}
	if o.oauth2URL != "" && !named {
		mechs = append(mechs, OAuth2Mechanisms...)
	}
	return strings.Join(mechs, " ")
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
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
