// Package mailendpoint turns a configured account into the imapx.Endpoint a
// read session is opened with: where to connect, how to secure the
// connection, which authorities to trust, and how to obtain the password.
//
// Secrets are not read here: the endpoint carries functions that resolve
// them afresh for every connection, so a rotated password or trust anchor
// reaches the next connection without a restart.
package mailendpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// ErrTrustAnchorNotLoadable reports a configured trust anchor whose material
// holds no PEM certificate. The message names no path and no material.
var ErrTrustAnchorNotLoadable = errors.New("mailendpoint: the trusted certificate authority holds no PEM certificate [MaterialNotReadable]")

// AccountKey is the normalized account identifier the database keys an
// account by: trimmed and lower-cased, so recasing an identifier in
// configuration is not a second account.
func AccountKey(id string) string { return strings.ToLower(strings.TrimSpace(id)) }

// Find returns the configured account whose identifier matches id after
// normalization.
func Find(cfg *config.Config, id string) (config.Account, bool) {
	key := AccountKey(id)
	for _, a := range cfg.Accounts {
		if AccountKey(a.ID) == key {
			return a, true
		}
	}
	return config.Account{}, false
}

// Endpoint builds the endpoint of account a. With AdditionalTrustedAuthority
// the anchor is read through resolver each time the endpoint's TLS
// configuration is asked for, that is once per connection.
func Endpoint(ctx context.Context, a config.Account, resolver *secret.Resolver) (imapx.Endpoint, error) {
	ep := imapx.Endpoint{
		AccountID: a.ID,
		Host:      a.Host,
		Port:      a.Port,
		Security:  imapx.ConnectionSecurity(a.TransportSecurity.ConnectionSecurity),
		Username:  a.Username,
		Password:  func(ctx context.Context) ([]byte, error) { return resolver.Resolve(ctx, a.Password) },

		PermittedMechanisms:           a.TransportSecurity.PermittedAuthenticationMechanisms,
		AllowClearTextOverUnencrypted: a.TransportSecurity.AllowClearTextAuthenticationOverUnencryptedConnection,
	}
	if a.TransportSecurity.CertificateTrust == config.AdditionalTrustedAuthority {
		pool, err := loadAnchor(ctx, resolver, a.TransportSecurity.TrustedCertificateAuthority)
		if err != nil {
			return imapx.Endpoint{}, err
		}
		ep.TLSConfig = &tls.Config{ServerName: a.Host, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return ep, nil
}

// loadAnchor reads PEM certificates into a pool that holds only them: the
// configured authority is the sole root, never added to the system's.
func loadAnchor(ctx context.Context, resolver *secret.Resolver, ref secret.Reference) (*x509.CertPool, error) {
	material, err := resolver.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer clear(material)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(material) {
		return nil, ErrTrustAnchorNotLoadable
	}
	return pool, nil
}
