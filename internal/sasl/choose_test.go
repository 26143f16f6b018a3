package sasl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sasl"
)

type mechs = []sasl.Mechanism

const (
	secTLS       = false // TlsOnConnect
	secSTARTTLS  = false // StartTlsRequired
	secWhenAvail = true  // StartTlsWhenAvailable
	secAuto      = true  // Auto
	secNone      = true  // None
)

// dovecotDefault is what the test Dovecot advertises by default.
var dovecotDefault = []string{"PLAIN", "LOGIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"}

func TestChoose(t *testing.T) {
	login := sasl.Choice{LoginCommand: true}
	mech := func(m sasl.Mechanism) sasl.Choice { return sasl.Choice{Mechanism: m} }

	for _, tc := range []struct {
		name       string
		s          sasl.Situation
		want       sasl.Choice
		wantReason string // substring of the unavailable reason; "" when a choice is wanted
	}{
		{
			name: "SCRAM over PLAIN whatever the configured order",
			s:    sasl.Situation{Permitted: mechs{"PLAIN", "SCRAM-SHA-256"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.ScramSHA256),
		},
		{
			name: "strongest of everything permitted",
			s:    sasl.Situation{Permitted: mechs{"LOGIN", "PLAIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.ScramSHA256),
		},
		{
			name: "SCRAM-SHA-512 over SCRAM-SHA-256 over SCRAM-SHA-1",
			s: sasl.Situation{
				Permitted:  mechs{"PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256", "SCRAM-SHA-512"},
				Advertised: []string{"PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256", "SCRAM-SHA-512"}, CanStayUnencrypted: secTLS, Encrypted: true,
			},
			want: mech(sasl.ScramSHA512),
		},
		{
			name: "SCRAM-SHA-512 permitted, not offered: SCRAM-SHA-256",
			s:    sasl.Situation{Permitted: mechs{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.ScramSHA256),
		},
		{
			name: "SCRAM-SHA-1 over CRAM-MD5",
			s:    sasl.Situation{Permitted: mechs{"CRAM-MD5", "SCRAM-SHA-1"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.ScramSHA1),
		},
		{
			name: "CRAM-MD5 over PLAIN",
			s:    sasl.Situation{Permitted: mechs{"PLAIN", "CRAM-MD5"}, Advertised: []string{"PLAIN", "CRAM-MD5"}, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.CramMD5),
		},
		{
			name: "PLAIN over LOGIN",
			s:    sasl.Situation{Permitted: mechs{"LOGIN", "PLAIN"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.Plain),
		},
		{
			name: "names match ignoring case, with or without AUTH=",
			s:    sasl.Situation{Permitted: mechs{"scram-sha-1"}, Advertised: []string{"AUTH=Scram-Sha-1", "auth=plain"}, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.ScramSHA1),
		},
		{
			name: "an advertised mechanism that is not permitted is never chosen",
			s:    sasl.Situation{Permitted: mechs{"PLAIN"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.Plain),
		},
		{
			// Configuration and imapx refuse such an allow-list; the chooser
			// still never picks what it cannot run.
			name: "unimplemented survivors are passed over",
			s: sasl.Situation{
				Permitted:          mechs{"SCRAM-SHA-512-PLUS", "SCRAM-SHA-256-PLUS", "DIGEST-MD5", "NTLM", "SCRAM-SHA-1"},
				Advertised:         []string{"SCRAM-SHA-512-PLUS", "SCRAM-SHA-256-PLUS", "DIGEST-MD5", "NTLM", "SCRAM-SHA-1"},
				CanStayUnencrypted: secTLS, Encrypted: true,
			},
			want: mech(sasl.ScramSHA1),
		},
		{
			name:       "only unimplemented survivors and no clear-text permission",
			s:          sasl.Situation{Permitted: mechs{"DIGEST-MD5", "NTLM"}, Advertised: []string{"DIGEST-MD5", "NTLM"}, CanStayUnencrypted: secTLS, Encrypted: true},
			wantReason: "no permitted mechanism this client implements",
		},
		{
			name:       "only CRAM-MD5 permitted and the server without it",
			s:          sasl.Situation{Permitted: mechs{"CRAM-MD5"}, Advertised: []string{"PLAIN", "LOGIN", "SCRAM-SHA-256"}, CanStayUnencrypted: secTLS, Encrypted: true},
			wantReason: "permits no clear-text mechanism",
		},
		{
			name:       "only challenge-response permitted and nothing advertised",
			s:          sasl.Situation{Permitted: mechs{"SCRAM-SHA-256", "CRAM-MD5"}, CanStayUnencrypted: secTLS, Encrypted: true},
			wantReason: "permits no clear-text mechanism",
		},
		{
			name: "nothing advertised, PLAIN permitted, encrypted: LOGIN command",
			s:    sasl.Situation{Permitted: mechs{"PLAIN"}, CanStayUnencrypted: secTLS, Encrypted: true},
			want: login,
		},
		{
			name: "nothing advertised, LOGIN permitted, STARTTLS done: LOGIN command",
			s:    sasl.Situation{Permitted: mechs{"LOGIN", "SCRAM-SHA-256"}, CanStayUnencrypted: secSTARTTLS, Encrypted: true},
			want: login,
		},
		{
			name: "only unpermitted mechanisms advertised, PLAIN permitted: LOGIN command",
			s:    sasl.Situation{Permitted: mechs{"PLAIN", "SCRAM-SHA-256"}, Advertised: []string{"GSSAPI", "CRAM-MD5"}, CanStayUnencrypted: secTLS, Encrypted: true},
			want: login,
		},
		{
			name:       "nothing advertised, PLAIN permitted, LOGINDISABLED",
			s:          sasl.Situation{Permitted: mechs{"PLAIN"}, LoginDisabled: true, CanStayUnencrypted: secTLS, Encrypted: true},
			wantReason: "LOGINDISABLED",
		},
		{
			name:       "unencrypted without the opt-in: no LOGIN command",
			s:          sasl.Situation{Permitted: mechs{"PLAIN"}, CanStayUnencrypted: secWhenAvail, Encrypted: false},
			wantReason: "not encrypted",
		},
		{
			name:       "unencrypted without the opt-in: no PLAIN either",
			s:          sasl.Situation{Permitted: mechs{"PLAIN", "LOGIN"}, Advertised: []string{"PLAIN", "LOGIN"}, CanStayUnencrypted: secNone, Encrypted: false},
			wantReason: "not encrypted",
		},
		{
			name: "unencrypted without the opt-in: challenge-response still fine",
			s:    sasl.Situation{Permitted: mechs{"PLAIN", "SCRAM-SHA-256"}, Advertised: []string{"PLAIN", "SCRAM-SHA-256"}, CanStayUnencrypted: secAuto, Encrypted: false},
			want: mech(sasl.ScramSHA256),
		},
		{
			name: "unencrypted with the opt-in: PLAIN",
			s:    sasl.Situation{Permitted: mechs{"PLAIN"}, Advertised: []string{"PLAIN"}, CanStayUnencrypted: secNone, AllowClearTextOverUnencrypted: true},
			want: mech(sasl.Plain),
		},
		{
			name: "unencrypted with the opt-in: LOGIN command",
			s:    sasl.Situation{Permitted: mechs{"PLAIN"}, CanStayUnencrypted: secAuto, AllowClearTextOverUnencrypted: true},
			want: login,
		},
		{
			name:       "a mode that cannot stay unencrypted, not encrypted: the opt-in does not count",
			s:          sasl.Situation{Permitted: mechs{"PLAIN"}, Advertised: []string{"PLAIN"}, CanStayUnencrypted: secTLS, AllowClearTextOverUnencrypted: true},
			wantReason: "not encrypted",
		},
		{
			name: "encrypted on an opportunistic mode: no opt-in needed",
			s:    sasl.Situation{Permitted: mechs{"PLAIN"}, Advertised: []string{"PLAIN"}, CanStayUnencrypted: secWhenAvail, Encrypted: true},
			want: mech(sasl.Plain),
		},
		{
			name: "password account never chooses a token mechanism",
			s:    sasl.Situation{Permitted: mechs{"XOAUTH2", "OAUTHBEARER", "PLAIN"}, Advertised: []string{"XOAUTH2", "OAUTHBEARER", "PLAIN"}, CanStayUnencrypted: secTLS, Encrypted: true},
			want: mech(sasl.Plain),
		},
		{
			name: "token account prefers OAUTHBEARER",
			s:    sasl.Situation{Permitted: mechs{"XOAUTH2", "OAUTHBEARER"}, Advertised: []string{"PLAIN", "XOAUTH2", "OAUTHBEARER"}, CanStayUnencrypted: secTLS, Encrypted: true, TokenAccount: true},
			want: mech(sasl.OAuthBearer),
		},
		{
			name: "token account with XOAUTH2 only",
			s:    sasl.Situation{Permitted: mechs{"XOAUTH2", "OAUTHBEARER"}, Advertised: []string{"XOAUTH2", "PLAIN"}, CanStayUnencrypted: secTLS, Encrypted: true, TokenAccount: true},
			want: mech(sasl.XOAuth2),
		},
		{
			name: "token account chooses only token mechanisms",
			s:    sasl.Situation{Permitted: mechs{"OAUTHBEARER", "SCRAM-SHA-256"}, Advertised: []string{"OAUTHBEARER", "SCRAM-SHA-256"}, CanStayUnencrypted: secTLS, Encrypted: true, TokenAccount: true},
			want: mech(sasl.OAuthBearer),
		},
		{
			name:       "token account never falls back to the LOGIN command",
			s:          sasl.Situation{Permitted: mechs{"XOAUTH2", "PLAIN"}, Advertised: []string{"PLAIN"}, CanStayUnencrypted: secTLS, Encrypted: true, TokenAccount: true},
			wantReason: "no permitted token mechanism",
		},
		{
			name:       "token account, server without token mechanisms",
			s:          sasl.Situation{Permitted: mechs{"XOAUTH2", "OAUTHBEARER"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true, TokenAccount: true},
			wantReason: "no permitted token mechanism",
		},
		{
			name:       "password account permitting only token mechanisms",
			s:          sasl.Situation{Permitted: mechs{"XOAUTH2"}, Advertised: []string{"XOAUTH2"}, CanStayUnencrypted: secTLS, Encrypted: true},
			wantReason: "permits no clear-text mechanism",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			got, err := sasl.Choose(s.Permitted, s.Advertised, s.LoginDisabled, s.CanStayUnencrypted, s.AllowClearTextOverUnencrypted, s.Encrypted, s.TokenAccount)
			if tc.wantReason == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
				return
			}
			require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
			require.Zero(t, got)
			require.Contains(t, err.Error(), tc.wantReason)
			require.True(t, strings.HasSuffix(err.Error(), "[MailAuthenticationMechanismUnavailable]"), err.Error())
			var mu *sasl.MechanismUnavailableError
			require.True(t, errors.As(err, &mu))
		})
	}
}

func TestChooseIgnoresConfiguredOrder(t *testing.T) {
	all := mechs{"PLAIN", "LOGIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"}
	for i := range all {
		rotated := append(append(mechs{}, all[i:]...), all[:i]...)
		got, err := sasl.Situation{Permitted: rotated, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true}.Choose()
		require.NoError(t, err)
		require.Equal(t, sasl.ScramSHA256, got.Mechanism, rotated)
	}
}

func TestChoiceString(t *testing.T) {
	require.Equal(t, "LOGIN command", sasl.Choice{LoginCommand: true}.String())
	require.Equal(t, "SCRAM-SHA-256", sasl.Choice{Mechanism: sasl.ScramSHA256}.String())
}
