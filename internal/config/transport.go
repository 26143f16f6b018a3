package config

import (
	"strings"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// CertificateTrust selects what a server certificate's chain must end at.
type CertificateTrust string

// The certificate-trust sources.
const (
	// SystemTrustStore trusts the system's authorities only.
	SystemTrustStore CertificateTrust = "SystemTrustStore"
	// AdditionalTrustedAuthority trusts the system's authorities and, in
	// addition, the deployment-provisioned authority named by
	// TRUSTED_CERTIFICATE_AUTHORITY: a certificate the platform cannot
	// chain to a root is re-examined with that authority as its only root.
	AdditionalTrustedAuthority CertificateTrust = "AdditionalTrustedAuthority"
)

// CertificateTrusts lists the trust sources in documentation order.
var CertificateTrusts = []CertificateTrust{SystemTrustStore, AdditionalTrustedAuthority}

// The transport-security rule identities configuration reports itself,
// appended in brackets to the problem that reports a violation. The rules
// about unencrypted connections and clear-text authentication are the
// adapter's (imapx.RuleUnencryptedConnectionRequiresExplicitOptIn,
// imapx.RuleClearTextAuthenticationRequiresExplicitOptIn), which enforces
// them again before it connects; configuration reports them under the same
// identities.
const (
	// RuleTrustAnchorNotExpected: SystemTrustStore with a trusted
	// certificate authority configured.
	RuleTrustAnchorNotExpected = "TrustAnchorNotExpected"
	// RuleTrustAnchorRequired: AdditionalTrustedAuthority without one.
	RuleTrustAnchorRequired = "TrustAnchorRequired"
	// RuleTrustAnchorPasswordWithoutTrustAnchor: a bundle password with no
	// trusted certificate authority for it to open.
	RuleTrustAnchorPasswordWithoutTrustAnchor = "TrustAnchorPasswordWithoutTrustAnchor"
)

// TransportSecurity is an account's transport security policy.
type TransportSecurity struct {
	// ConnectionSecurity is MAILFATHOM_ACCOUNTS_<i>_CONNECTION_SECURITY.
	// Default TlsOnConnect.
	ConnectionSecurity imapx.ConnectionSecurity
	// PermittedAuthenticationMechanisms is
	// MAILFATHOM_ACCOUNTS_<i>_PERMITTED_AUTHENTICATION_MECHANISMS, a
	// comma-separated allow-list matched ignoring case, stored in canonical
	// form with duplicates collapsed in configured order. Default PLAIN,
	// LOGIN, applied only when unset. The order is presentation only.
	PermittedAuthenticationMechanisms []sasl.Mechanism
	// AllowInsecureConnection is
	// MAILFATHOM_ACCOUNTS_<i>_ALLOW_INSECURE_CONNECTION, the opt-in that
	// permits a mode that can stay unencrypted. Default false.
	AllowInsecureConnection bool
	// AllowClearTextAuthenticationOverUnencryptedConnection is
	// MAILFATHOM_ACCOUNTS_<i>_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION,
	// the further opt-in that permits PLAIN or LOGIN on such a mode. Default
	// false.
	AllowClearTextAuthenticationOverUnencryptedConnection bool
	// CertificateTrust is MAILFATHOM_ACCOUNTS_<i>_CERTIFICATE_TRUST. Default
	// SystemTrustStore.
	CertificateTrust CertificateTrust
	// TrustedCertificateAuthority is
	// MAILFATHOM_ACCOUNTS_<i>_TRUSTED_CERTIFICATE_AUTHORITY, a secret
	// reference to PEM, DER or PKCS#12 material. Required by
	// AdditionalTrustedAuthority, refused by SystemTrustStore. Zero by
	// default.
	TrustedCertificateAuthority secret.Reference
	// TrustedCertificateAuthorityPassword is
	// MAILFATHOM_ACCOUNTS_<i>_TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD, a
	// secret reference to a PKCS#12 bundle's password. Zero by default.
	TrustedCertificateAuthorityPassword secret.Reference
	// TrustedCertificateAuthorityInline is the PEM text of the trusted
	// certificate authority when the interpretation mode lets
	// TRUSTED_CERTIFICATE_AUTHORITY carry the material itself (a public
	// certificate leaks nothing); empty when it is a reference.
	TrustedCertificateAuthorityInline string
}

// TokenOnly reports whether the allow-list permits only token mechanisms
// (XOAUTH2 and/or OAUTHBEARER), which makes the account a token account: it
// authenticates with an access token obtained through its OAuth block and
// has no password. An allow-list permitting any password mechanism is a
// password account, and the token mechanisms in it are never used.
func (t TransportSecurity) TokenOnly() bool {
	if len(t.PermittedAuthenticationMechanisms) == 0 {
		return false
	}
	for _, m := range t.PermittedAuthenticationMechanisms {
		if !m.Token() {
			return false
		}
	}
	return true
}

// InterpretationMode says how a trust-anchor setting's value is read.
type InterpretationMode string

// The interpretation modes.
const (
	// ReferenceOnly reads the value as a <scheme>:<target> reference only:
	// no material ever sits in configuration. The default.
	ReferenceOnly InterpretationMode = "ReferenceOnly"
	// ReferenceOrInline reads a value that parses as a reference as one,
	// and anything else as inline PEM.
	ReferenceOrInline InterpretationMode = "ReferenceOrInline"
	// InlineOnly reads the value as inline PEM.
	InlineOnly InterpretationMode = "InlineOnly"
)

// InterpretationModes lists the modes in documentation order.
var InterpretationModes = []InterpretationMode{ReferenceOnly, ReferenceOrInline, InlineOnly}

type rawTransport struct {
	ConnectionSecurity                                    string `env:"CONNECTION_SECURITY" envDefault:"TlsOnConnect"`
	PermittedAuthenticationMechanisms                     string `env:"PERMITTED_AUTHENTICATION_MECHANISMS" envDefault:"PLAIN,LOGIN"`
	AllowInsecureConnection                               string `env:"ALLOW_INSECURE_CONNECTION" envDefault:"false"`
	AllowClearTextAuthenticationOverUnencryptedConnection string `env:"ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION" envDefault:"false"`
	CertificateTrust                                      string `env:"CERTIFICATE_TRUST" envDefault:"SystemTrustStore"`
	TrustedCertificateAuthority                           string `env:"TRUSTED_CERTIFICATE_AUTHORITY"`
	TrustedCertificateAuthorityPassword                   string `env:"TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD"`
}

// convertTransport converts account i's transport settings and enforces the
// policy rules on whatever converted. label names the account in messages.
// ok reports whether the connection-security mode converted, mechanismsOK
// whether every item of the allow-list did.
func convertTransport(c *converter, i int, label string, raw rawTransport) (t TransportSecurity, ok, mechanismsOK bool) {
	v := func(name string) string { return accountVar(i, name) }

	t.ConnectionSecurity, ok = enum(c, v("CONNECTION_SECURITY"), raw.ConnectionSecurity, imapx.ConnectionSecurities)
	t.PermittedAuthenticationMechanisms, mechanismsOK = convertMechanisms(c, v("PERMITTED_AUTHENTICATION_MECHANISMS"), raw.PermittedAuthenticationMechanisms)
	t.AllowInsecureConnection = c.boolean(v("ALLOW_INSECURE_CONNECTION"), raw.AllowInsecureConnection)
	t.AllowClearTextAuthenticationOverUnencryptedConnection = c.boolean(v("ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION"), raw.AllowClearTextAuthenticationOverUnencryptedConnection)
	trust, trustOK := enum(c, v("CERTIFICATE_TRUST"), raw.CertificateTrust, CertificateTrusts)
	t.CertificateTrust = trust
	switch ref, err := secret.ParseReference(raw.TrustedCertificateAuthority); {
	case raw.TrustedCertificateAuthority == "":
	case c.interpretation == InlineOnly, c.interpretation == ReferenceOrInline && err != nil:
		t.TrustedCertificateAuthorityInline = raw.TrustedCertificateAuthority
	default:
		_ = ref
		t.TrustedCertificateAuthority = c.reference(v("TRUSTED_CERTIFICATE_AUTHORITY"), raw.TrustedCertificateAuthority)
	}
	t.TrustedCertificateAuthorityPassword = c.reference(v("TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD"), raw.TrustedCertificateAuthorityPassword)

	if ok && t.ConnectionSecurity.CanStayUnencrypted() {
		if !t.AllowInsecureConnection {
			c.addRule(v("CONNECTION_SECURITY"), imapx.RuleUnencryptedConnectionRequiresExplicitOptIn,
				"%s: An unencrypted connection requires %s=true.", label, v("ALLOW_INSECURE_CONNECTION"))
		}
		for _, m := range t.PermittedAuthenticationMechanisms {
			if m.ClearText() {
				if !t.AllowClearTextAuthenticationOverUnencryptedConnection {
					c.addRule(v("PERMITTED_AUTHENTICATION_MECHANISMS"), imapx.RuleClearTextAuthenticationRequiresExplicitOptIn,
						"%s: Permitting PLAIN or LOGIN on a connection that can stay unencrypted requires %s=true.", label, v("ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION"))
				}
				break
			}
		}
	}

	// Presence is decided by the configured text, not by whether it parsed:
	// a malformed reference is still an anchor the operator supplied, and is
	// reported as malformed rather than as missing.
	anchor := raw.TrustedCertificateAuthority != ""
	if trustOK {
		switch {
		case trust == SystemTrustStore && anchor:
			c.addRule(v("TRUSTED_CERTIFICATE_AUTHORITY"), RuleTrustAnchorNotExpected,
				"%s: %s=SystemTrustStore does not take a trusted certificate authority; set %s=AdditionalTrustedAuthority or remove this variable.", label, v("CERTIFICATE_TRUST"), v("CERTIFICATE_TRUST"))
		case trust == AdditionalTrustedAuthority && !anchor:
			c.addRule(v("TRUSTED_CERTIFICATE_AUTHORITY"), RuleTrustAnchorRequired,
				"%s: %s=AdditionalTrustedAuthority requires a trusted certificate authority in this variable.", label, v("CERTIFICATE_TRUST"))
		}
	}
	if raw.TrustedCertificateAuthorityPassword != "" && !anchor {
		c.addRule(v("TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD"), RuleTrustAnchorPasswordWithoutTrustAnchor,
			"%s: A trusted certificate authority password is configured without a trusted certificate authority.", label)
	}
	return t, ok, mechanismsOK
}

// convertMechanisms parses the comma-separated allow-list. A registered
// mechanism MailFathom does not implement (sasl.Unimplemented: DIGEST-MD5,
// NTLM, every -PLUS variant) breaks the rule
// AuthenticationMechanismNotSupported: it is refused here rather than
// skipped where a connection authenticates, where "SCRAM-SHA-256-PLUS,PLAIN"
// would quietly mean PLAIN. Any other unknown name is a parse failure,
// reported without a rule identity. ok reports whether every item parsed
// and is supported.
func convertMechanisms(c *converter, variable, raw string) (out []sasl.Mechanism, ok bool) {
	ok = true
	seen := map[sasl.Mechanism]bool{}
	for n, item := range strings.Split(raw, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			c.add(variable, "item %d is empty; list mechanism names separated by commas", n+1)
			ok = false
			continue
		}
		m, found := lookupMechanism(sasl.Mechanisms, item)
		if !found {
			if _, known := lookupMechanism(sasl.Unimplemented, item); known {
				c.addRule(variable, imapx.RuleAuthenticationMechanismNotSupported,
					"item %d%s names a mechanism MailFathom does not implement, which is refused rather than skipped so the allow-list never quietly means a weaker mechanism; supported names are %s",
					n+1, quoteToken(item), joinNames(sasl.Mechanisms))
			} else {
				c.add(variable, "item %d%s is not a supported mechanism; supported names are %s", n+1, quoteToken(item), joinNames(sasl.Mechanisms))
			}
			ok = false
			continue
		}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out, ok
}

func lookupMechanism(names []sasl.Mechanism, name string) (sasl.Mechanism, bool) {
	for _, m := range names {
		if strings.EqualFold(string(m), name) {
			return m, true
		}
	}
	return "", false
}

// quoteToken returns " ('name')" when s looks like a mechanism name (a short
// run of letters, digits, '-' and '_'), and "" otherwise, so nothing that
// could be a pasted credential is echoed.
func quoteToken(s string) string {
	if len(s) > 24 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return ""
		}
	}
	return " ('" + s + "')"
}
