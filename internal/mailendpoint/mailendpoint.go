// Package mailendpoint turns a configured account into the imapx.Endpoint a
// read session is opened with: where to connect, how to secure the
// connection, which authorities to trust, and how to obtain the credential —
// the password of a password account, or the access token of a token
// account (one whose allow-list permits only XOAUTH2 and/or OAUTHBEARER).
//
// Secrets are not read here: the endpoint carries functions that resolve
// them afresh for every connection, so a rotated password, OAuth reference or
// trust anchor reaches the next connection without a restart.
package mailendpoint

import (
	"context"
	"errors"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/trustanchor"
)

// Env is what building an endpoint needs besides the account: how secret
// settings are read and where they are resolved.
type Env struct {
	// Mode is the deployment's MAILFATHOM_SECRET_INTERPRETATION_MODE.
	Mode config.InterpretationMode
	// Resolver resolves secret references. Required.
	Resolver *secret.Resolver
	// Registry holds the outbound resilience pipelines; an OAuth account's
	// token request runs under its MailAuthorizationServerInvocation
	// pipeline keyed by the account.
	Registry *resilience.Registry
	// Tokens obtains and caches the access tokens of token accounts. It is
	// long-lived — one per process, built with mailoauth.NewSource on the
	// same Resolver and Registry — because it keeps each account's current
	// access token and any refresh token the server rotated. Required when
	// a token account is built; password accounts do not use it.
	Tokens *mailoauth.Source
}

// ErrNoTokenSource is returned by Endpoint for a token account when
// Env.Tokens is nil.
var ErrNoTokenSource = errors.New("mailendpoint: a token account needs Env.Tokens (a mailoauth.Source)")

// Endpoint builds the endpoint of account a. With AdditionalTrustedAuthority
// the anchor is loaded through env.Resolver now, that is once per work unit,
// so a replaced anchor file is used by the next run without a restart; it is
// trusted in addition to the system's roots (trustanchor.Anchor.Verify): a
// certificate the platform trusts is accepted, and only one the platform
// cannot chain to a root is re-examined with the anchor as its sole root.
//
// A token account's endpoint has no password: its Token asks env.Tokens for
// the account's access token (keyed by config.AccountKey, which is also the
// instance of its MailAuthorizationServerInvocation pipeline), and its
// TokenRefused makes env.Tokens forget a token the mail server refused.
func Endpoint(ctx context.Context, a config.Account, env Env) (imapx.Endpoint, error) {
	mode, resolver := env.Mode, env.Resolver
	ep := imapx.Endpoint{
		AccountID: a.ID,
		Host:      a.Host,
		Port:      a.Port,
		Security:  a.TransportSecurity.ConnectionSecurity,
		Username:  a.Username,
		Password:  func(ctx context.Context) ([]byte, error) { return resolver.Resolve(ctx, a.Password) },

		PermittedMechanisms:           a.TransportSecurity.PermittedAuthenticationMechanisms,
		AllowInsecureConnection:       a.TransportSecurity.AllowInsecureConnection,
		AllowClearTextOverUnencrypted: a.TransportSecurity.AllowClearTextAuthenticationOverUnencryptedConnection,
		Compression:                   a.Compression,
	}
	if a.TransportSecurity.CertificateTrust == config.AdditionalTrustedAuthority {
		anchor, err := LoadAnchor(ctx, a, mode, resolver)
		if err != nil {
			return imapx.Endpoint{}, err
		}
		ep.TLSConfig = anchor.TLSConfig(a.Host)
	}
	if a.TransportSecurity.TokenOnly() {
		if env.Tokens == nil {
			return imapx.Endpoint{}, ErrNoTokenSource
		}
		key, block, tokens := config.AccountKey(a.ID), a.OAuth, env.Tokens
		ep.Password = nil
		ep.Token = func(ctx context.Context) ([]byte, error) { return tokens.Token(ctx, key, block) }
		ep.TokenRefused = func() { tokens.Forget(key) }
	}
	return ep, nil
}

// LoadAnchor loads the account's additional trusted authority under the
// deployment's interpretation mode: from its reference, resolving the
// material (and a bundle's password) afresh, or from the PEM the setting
// carries itself. Failures are *trustanchor.LoadError, named, without
// material.
func LoadAnchor(ctx context.Context, a config.Account, mode config.InterpretationMode, resolver *secret.Resolver) (*trustanchor.Anchor, error) {
	ts := a.TransportSecurity
	var password *secret.Reference
	if !ts.TrustedCertificateAuthorityPassword.IsZero() {
		pw := ts.TrustedCertificateAuthorityPassword
		password = &pw
	}
	m, err := trustanchor.ParseInterpretationMode(string(mode))
	if err != nil {
		return nil, err
	}
	src := trustanchor.FromReference(ts.TrustedCertificateAuthority)
	if ts.TrustedCertificateAuthorityInline != "" {
		src = trustanchor.FromValue(ts.TrustedCertificateAuthorityInline)
	}
	return trustanchor.Load(ctx, resolver, src, password, m)
}
