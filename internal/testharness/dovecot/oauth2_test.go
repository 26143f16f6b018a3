package dovecot_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
)

// bearer returns a client side of XOAUTH2 or OAUTHBEARER (RFC 7628 §3.1)
// for rawConn.authenticate: the initial response after the server's empty
// challenge, and the answer to an error challenge (an empty response for
// XOAUTH2, 0x01 for OAUTHBEARER), which it records in *refusal.
func bearer(mech, user, token string, refusal *string) func([]byte) []byte {
	step := 0
	return func(challenge []byte) []byte {
		step++
		if step == 1 {
			if mech == "XOAUTH2" {
				return []byte("user=" + user + "\x01auth=Bearer " + token + "\x01\x01")
			}
			return []byte("n,a=" + user + ",\x01auth=Bearer " + token + "\x01\x01")
		}
		*refusal = string(challenge)
		if mech == "XOAUTH2" {
			return nil
		}
		return []byte{0x01}
	}
}

// tokenFor obtains an access token for refresh from as, as the code under
// test would.
func tokenFor(t *testing.T, as *oauthtest.Server, refresh string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, as.TokenURL(), strings.NewReader(url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {refresh},
	}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(as.ClientID()), url.QueryEscape(as.ClientSecret()))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.AccessToken
}

func TestWithOAuth2(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	s := dovecot.Start(t, dovecot.WithOAuth2(as.IntrospectionURL()), dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
	u := s.AddUser("grace", "pw")
	other := s.AddUser("heidi", "pw2")

	pre := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	for _, m := range []string{"AUTH=PLAIN", "AUTH=SCRAM-SHA-256", "AUTH=XOAUTH2", "AUTH=OAUTHBEARER"} {
		require.Contains(t, pre.Greeting, m)
	}

	token := tokenFor(t, as, as.Grant(u.Name()))
	for _, mech := range []string{"XOAUTH2", "OAUTHBEARER"} {
		var refusal string
		st := dialRaw(t, "", s.TLSAddr(), s.TLSConfig()).authenticate(mech, bearer(mech, u.Name(), token, &refusal))
		require.True(t, strings.HasPrefix(st, "OK"), "%s: %s", mech, st)
		require.Empty(t, refusal)
		s.WaitLog(fmt.Sprintf("user=<%s>, method=%s,", u.Name(), mech), dovecot.LogWait)
	}
	require.Equal(t, []string{token, token}, as.Introspections(), "every login introspects the token")

	// A token for another user, a revoked token and an expired one are
	// refused after the mechanism's error challenge.
	otherToken := tokenFor(t, as, as.Grant(other.Name()))
	revoked := tokenFor(t, as, as.Grant(u.Name()))
	as.Revoke(revoked)
	for _, tc := range []struct{ name, mech, token string }{
		{"another user's token", "XOAUTH2", otherToken},
		{"revoked", "OAUTHBEARER", revoked},
		{"unknown", "XOAUTH2", "not-a-token"},
	} {
		var refusal string
		st := dialRaw(t, "", s.TLSAddr(), s.TLSConfig()).authenticate(tc.mech, bearer(tc.mech, u.Name(), tc.token, &refusal))
		require.True(t, strings.HasPrefix(st, "NO"), "%s: %s", tc.name, st)
		require.Contains(t, st, "AUTHENTICATIONFAILED", tc.name)
		require.Contains(t, refusal, `"status"`, "%s: the refusal is the JSON error challenge", tc.name)
	}
	as.Advance(oauthtest.DefaultLifetime + time.Second)
	var refusal string
	st := dialRaw(t, "", s.TLSAddr(), s.TLSConfig()).authenticate("XOAUTH2", bearer("XOAUTH2", u.Name(), token, &refusal))
	require.True(t, strings.HasPrefix(st, "NO"), "an expired token: %s", st)

	// Password mechanisms and the LOGIN command keep using the passwd-file.
	rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	st = rc.authenticate("SCRAM-SHA-256", scram(t, sha256.New, u.Name(), u.Password()))
	require.True(t, strings.HasPrefix(st, "OK"), st)
	require.Empty(t, u.UIDs("INBOX"))
	// A token is not a password.
	_, st = dialRaw(t, "", s.TLSAddr(), s.TLSConfig()).cmd(fmt.Sprintf("LOGIN %s %s", u.Name(), token))
	require.True(t, strings.HasPrefix(st, "NO"), st)
}

func TestWithOAuth2OffersWhatWithAuthMechanismsNames(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	s := dovecot.Start(t, dovecot.WithOAuth2(as.IntrospectionURL()), dovecot.WithAuthMechanisms("plain", "xoauth2"))
	pre := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	require.Contains(t, pre.Greeting, "AUTH=XOAUTH2")
	require.NotContains(t, pre.Greeting, "AUTH=OAUTHBEARER")

	u := s.AddUser("ivan", "pw")
	var refusal string
	st := dialRaw(t, "", s.TLSAddr(), s.TLSConfig()).authenticate("XOAUTH2", bearer("XOAUTH2", u.Name(), as.Issue(u.Name()), &refusal))
	require.True(t, strings.HasPrefix(st, "OK"), st)
}
