package trustanchor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// anchorOf returns an anchor holding ca's root, loaded as an operator's PEM
// file would be.
func anchorOf(t *testing.T, ca *testca.Bundle) *Anchor {
	t.Helper()
	fx := newFixture(t)
	a, err := fx.load(FromReference(fx.file("ca.pem", ca.CA.CertPEM)), nil, ReferenceOnly)
	require.NoError(t, err)
	return a
}

// presented is what a server configured with l sends: l and its
// intermediates.
func presented(l *testca.Leaf) []*x509.Certificate {
	chain := []*x509.Certificate{l.Cert}
	for c := l.Issuer; c.Parent != nil; c = c.Parent {
		chain = append(chain, c.Cert)
	}
	return chain
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	other := testca.New()
	a := anchorOf(t, ca)
	inter := ca.IntermediateServer()
	expired := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	notYet := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(24 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	noEKU := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}})

	tests := []struct {
		name   string
		anchor *Anchor
		host   string
		certs  []*x509.Certificate
		want   ValidationFailure // "" means trusted
	}{
		{name: "server certificate, DNS name", host: "localhost", certs: presented(ca.Server)},
		{name: "server certificate, DNS name in another case", host: "LocalHost", certs: presented(ca.Server)},
		{name: "server certificate, IPv4 SAN", host: "127.0.0.1", certs: presented(ca.Server)},
		{name: "server certificate, IPv6 SAN", host: "::1", certs: presented(ca.Server)},
		{name: "intermediate sent by the server", host: "127.0.0.1", certs: presented(inter)},
		{name: "intermediate not sent", host: "127.0.0.1", certs: []*x509.Certificate{inter.Cert}, want: CertificateChainUntrusted},
		{name: "another authority", host: "127.0.0.1", certs: presented(ca.OtherCAServer()), want: CertificateChainUntrusted},
		{
			name: "another authority sending its own root gains no trust", host: "127.0.0.1",
			certs: []*x509.Certificate{other.Server.Cert, other.CA.Cert}, want: CertificateChainUntrusted,
		},
		{name: "the anchor is the only root", anchor: anchorOf(t, other), host: "127.0.0.1", certs: presented(ca.Server), want: CertificateChainUntrusted},
		{name: "wrong name", host: "127.0.0.1", certs: presented(ca.WrongNameServer()), want: ServerNameMismatch},
		{name: "wrong name, checked for its own name", host: testca.WrongHost, certs: presented(ca.WrongNameServer())},
		{name: "IP not in the IP SANs", host: "127.0.0.9", certs: presented(ca.Server), want: ServerNameMismatch},
		{name: "no server name", host: "", certs: presented(ca.Server), want: ServerNameMismatch},
		{name: "client authentication only", host: "127.0.0.1", certs: presented(ca.ClientAuthOnlyServer()), want: CertificateNotUsableForServerAuthentication},
		{name: "e-mail protection only", host: "127.0.0.1", certs: presented(noEKU), want: CertificateNotUsableForServerAuthentication},
		{name: "expired", host: "127.0.0.1", certs: presented(expired), want: CertificateExpired},
		{name: "not yet valid", host: "127.0.0.1", certs: presented(notYet), want: CertificateExpired},
		{name: "no certificate", host: "127.0.0.1", want: ServerCertificateUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			anchor := tt.anchor
			if anchor == nil {
				anchor = a
			}
			err := anchor.Verify(tt.host, tt.certs)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.want, ve.Failure, "%v", err)
			require.True(t, errors.Is(err, &ValidationError{Failure: tt.want}))
			require.Contains(t, err.Error(), "["+string(tt.want)+"]")
			require.Same(t, ve, Classify(err))
		})
	}
}

func TestVerifyReasonsTellExpiredFromNotYetValid(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	a := anchorOf(t, ca)
	expired := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	notYet := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	require.ErrorContains(t, a.Verify("localhost", presented(expired)), "has expired")
	require.ErrorContains(t, a.Verify("localhost", presented(notYet)), "not yet valid")
}

func TestVerifyConnection(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	a := anchorOf(t, ca)
	wrong := ca.WrongNameServer()

	err := a.VerifyConnection("127.0.0.1")(tls.ConnectionState{PeerCertificates: presented(wrong), ServerName: testca.WrongHost})
	var (
		verr *tls.CertificateVerificationError
		ve   *ValidationError
		herr x509.HostnameError
	)
	require.ErrorAs(t, err, &verr, "the shape crypto/tls gives its own refusals")
	require.Equal(t, wrong.Cert, verr.UnverifiedCertificates[0])
	require.ErrorAs(t, err, &ve)
	require.Equal(t, ServerNameMismatch, ve.Failure)
	require.ErrorAs(t, err, &herr, "the crypto/x509 cause stays reachable")
	require.Equal(t, ServerNameMismatch, Classify(err).Failure)

	// The name given to VerifyConnection wins over the connection's.
	require.NoError(t, a.VerifyConnection(testca.WrongHost)(tls.ConnectionState{PeerCertificates: presented(wrong), ServerName: "127.0.0.1"}))
	// Without one, the connection's name is checked; without both, nothing passes.
	require.NoError(t, a.VerifyConnection("")(tls.ConnectionState{PeerCertificates: presented(ca.Server), ServerName: "localhost"}))
	err = a.VerifyConnection("")(tls.ConnectionState{PeerCertificates: presented(ca.Server)})
	require.Equal(t, ServerNameMismatch, Classify(err).Failure)
}

// handshake runs a TLS handshake over loopback TCP between a server
// presenting leaf and a client using cfg, and returns the client's error.
func handshake(t *testing.T, leaf *testca.Leaf, cfg *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}, MinVersion: tls.VersionTLS12})
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		if s.Handshake() == nil {
			_, _ = s.Write([]byte("ok"))
		}
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2)
		_, err = io.ReadFull(conn, buf)
		conn.Close()
	}
	<-done
	return err
}

func TestTLSConfigHandshakes(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	a := anchorOf(t, ca)
	expired := ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})

	cfg := a.TLSConfig("127.0.0.1")
	require.False(t, cfg.InsecureSkipVerify)
	require.NotNil(t, cfg.RootCAs)
	require.NotNil(t, cfg.VerifyConnection)
	require.Equal(t, "127.0.0.1", cfg.ServerName)
	require.NotSame(t, cfg.RootCAs, a.TLSConfig("127.0.0.1").RootCAs, "each configuration has its own pool")

	tests := []struct {
		name string
		leaf *testca.Leaf
		host string
		want ValidationFailure
	}{
		{name: "server certificate by IP", leaf: ca.Server, host: "127.0.0.1"},
		{name: "server certificate by name", leaf: ca.Server, host: "localhost"},
		{name: "intermediate", leaf: ca.IntermediateServer(), host: "127.0.0.1"},
		{name: "another authority", leaf: ca.OtherCAServer(), host: "127.0.0.1", want: CertificateChainUntrusted},
		{name: "wrong name", leaf: ca.WrongNameServer(), host: "127.0.0.1", want: ServerNameMismatch},
		{name: "client authentication only", leaf: ca.ClientAuthOnlyServer(), host: "127.0.0.1", want: CertificateNotUsableForServerAuthentication},
		{name: "expired", leaf: expired, host: "127.0.0.1", want: CertificateExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := handshake(t, tt.leaf, a.TLSConfig(tt.host))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var verr *tls.CertificateVerificationError
			require.ErrorAs(t, err, &verr)
			require.NotNil(t, Classify(err), "%v", err)
			require.Equal(t, tt.want, Classify(err).Failure, "%v", err)
		})
	}
}

// TestTLSConfigCannotBeTalkedOutOfValidation changes a clone of the
// configuration the ways a careless caller could, and shows the anchor
// still decides, through VerifyConnection.
func TestTLSConfigCannotBeTalkedOutOfValidation(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	other := testca.New()
	a := anchorOf(t, ca)
	for name, tc := range map[string]struct {
		mutate func(*tls.Config)
		leaf   *testca.Leaf
		want   ValidationFailure
	}{
		"InsecureSkipVerify, another authority": {
			mutate: func(c *tls.Config) { c.InsecureSkipVerify = true },
			leaf:   other.Server, want: CertificateChainUntrusted,
		},
		"InsecureSkipVerify, wrong name": {
			mutate: func(c *tls.Config) { c.InsecureSkipVerify = true },
			leaf:   ca.WrongNameServer(), want: ServerNameMismatch,
		},
		"RootCAs replaced with the other authority": {
			mutate: func(c *tls.Config) { c.RootCAs = other.CertPool() },
			leaf:   other.Server, want: CertificateChainUntrusted,
		},
		"ServerName changed to the certificate's": {
			mutate: func(c *tls.Config) { c.ServerName = testca.WrongHost },
			leaf:   ca.WrongNameServer(), want: ServerNameMismatch,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := a.TLSConfig("127.0.0.1").Clone()
			tc.mutate(cfg)
			err := handshake(t, tc.leaf, cfg)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve, "VerifyConnection refused it: %v", err)
			require.Equal(t, tc.want, ve.Failure)
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	require.Nil(t, Classify(nil))
	require.Nil(t, Classify(io.EOF))
	require.Nil(t, Classify(tls.AlertError(40)))
	require.Nil(t, Classify(&net.OpError{Op: "dial", Err: errors.New("connection refused")}))
	require.Equal(t, CertificateChainUntrusted, Classify(x509.UnknownAuthorityError{}).Failure)
	require.Equal(t, CertificateChainUntrusted, Classify(x509.SystemRootsError{}).Failure)
	require.Equal(t, ServerNameMismatch, Classify(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: ca.Server.Cert, Host: "x"}}).Failure)
	require.Equal(t, CertificateNotUsableForServerAuthentication, Classify(x509.CertificateInvalidError{Reason: x509.IncompatibleUsage}).Failure)
	require.Equal(t, CertificateExpired, Classify(x509.CertificateInvalidError{Reason: x509.Expired, Cert: ca.Server.Cert}).Failure)
	require.Equal(t, CertificateChainUntrusted, Classify(x509.CertificateInvalidError{Reason: x509.NotAuthorizedToSign}).Failure)
	require.Equal(t, CertificateChainUntrusted, Classify(&tls.CertificateVerificationError{Err: errors.New("other")}).Failure)
}

// withSystemRoots is a copy of a whose first verification step trusts
// roots instead of the platform's, as a system trust store holding them
// would.
func withSystemRoots(a *Anchor, roots *x509.CertPool) *Anchor {
	c := *a
	c.systemRoots = roots
	return &c
}

// TestVerifyTrustsTheSystemFirst: under AdditionalTrustedAuthority the
// anchor is additional. A certificate the system's roots vouch for is
// trusted whatever the anchor; one they cannot chain is re-examined with
// the anchor as the only root; a wrong name, an expired certificate or a
// usage other than server authentication is refused either way, each with
// its own identity. public stands in for an authority of the platform's
// trust store (the platform's own store is exercised by
// TestDovecotPublicCertificateUnderAnAnchor in a process of its own).
func TestVerifyTrustsTheSystemFirst(t *testing.T) {
	t.Parallel()
	public := testca.New()
	private := testca.New()
	other := testca.New()
	a := withSystemRoots(anchorOf(t, private), public.CertPool())
	expired := func(ca *testca.Bundle) *testca.Leaf {
		return ca.CA.Issue(testca.LeafOptions{Hosts: testca.ServerHosts, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	}

	tests := []struct {
		name   string
		anchor *Anchor
		host   string
		certs  []*x509.Certificate
		want   ValidationFailure // "" means trusted
	}{
		{name: "publicly trusted certificate", host: "localhost", certs: presented(public.Server)},
		{name: "publicly trusted certificate by IP", host: "127.0.0.1", certs: presented(public.Server)},
		{name: "publicly trusted certificate through an intermediate", host: "127.0.0.1", certs: presented(public.IntermediateServer())},
		{name: "anchor's certificate", host: "127.0.0.1", certs: presented(private.Server)},
		{name: "anchor's certificate through an intermediate", host: "127.0.0.1", certs: presented(private.IntermediateServer())},
		{name: "anchor's intermediate not sent", host: "127.0.0.1", certs: []*x509.Certificate{private.IntermediateServer().Cert}, want: CertificateChainUntrusted},
		{name: "neither the system nor the anchor", host: "127.0.0.1", certs: presented(other.Server), want: CertificateChainUntrusted},
		{
			name: "an authority the server sends along gains no trust", host: "127.0.0.1",
			certs: []*x509.Certificate{other.Server.Cert, other.CA.Cert}, want: CertificateChainUntrusted,
		},
		{name: "publicly trusted, wrong name", host: "127.0.0.1", certs: presented(public.WrongNameServer()), want: ServerNameMismatch},
		{name: "anchor's, wrong name", host: "127.0.0.1", certs: presented(private.WrongNameServer()), want: ServerNameMismatch},
		{name: "publicly trusted, expired", host: "127.0.0.1", certs: presented(expired(public)), want: CertificateExpired},
		{name: "anchor's, expired", host: "127.0.0.1", certs: presented(expired(private)), want: CertificateExpired},
		{name: "publicly trusted, client authentication only", host: "127.0.0.1", certs: presented(public.ClientAuthOnlyServer()), want: CertificateNotUsableForServerAuthentication},
		{name: "anchor's, client authentication only", host: "127.0.0.1", certs: presented(private.ClientAuthOnlyServer()), want: CertificateNotUsableForServerAuthentication},
		{name: "no server name", host: "", certs: presented(public.Server), want: ServerNameMismatch},
		{name: "no certificate", host: "127.0.0.1", want: ServerCertificateUnavailable},
		{
			name: "a platform without roots still trusts the anchor", anchor: withSystemRoots(a, x509.NewCertPool()),
			host: "127.0.0.1", certs: presented(private.Server),
		},
		{
			name: "a platform without roots trusts nothing else", anchor: withSystemRoots(a, x509.NewCertPool()),
			host: "127.0.0.1", certs: presented(public.Server), want: CertificateChainUntrusted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			anchor := tt.anchor
			if anchor == nil {
				anchor = a
			}
			err := anchor.Verify(tt.host, tt.certs)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.want, ve.Failure, "%v", err)
			require.Contains(t, err.Error(), "["+string(tt.want)+"]")
		})
	}
}

// TestTLSConfigTrustsTheSystemFirst: a handshake under TLSConfig accepts a
// server whose certificate the system's roots vouch for, as well as one the
// anchor does, and refuses the rest with the identity Verify gives.
func TestTLSConfigTrustsTheSystemFirst(t *testing.T) {
	t.Parallel()
	public := testca.New()
	private := testca.New()
	a := withSystemRoots(anchorOf(t, private), public.CertPool())
	for name, tc := range map[string]struct {
		leaf *testca.Leaf
		want ValidationFailure
	}{
		"publicly trusted":             {leaf: public.Server},
		"anchor's":                     {leaf: private.Server},
		"anchor's intermediate":        {leaf: private.IntermediateServer()},
		"publicly trusted, wrong name": {leaf: public.WrongNameServer(), want: ServerNameMismatch},
		"neither":                      {leaf: testca.New().Server, want: CertificateChainUntrusted},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := handshake(t, tc.leaf, a.TLSConfig("127.0.0.1"))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, Classify(err).Failure, "%v", err)
		})
	}
}
