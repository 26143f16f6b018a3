package config

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// secretMarker appears in every secret value of the test environments: the
// reference targets, the IMAP user names, and the database password in a
// URL. No error text may contain it.
const secretMarker = "SENTINEL"

// unset in an override removes the variable.
const unset = "\x00unset"

// fixedNow is 23:30 on 15 March in UTC-5, which is already 16 March in UTC:
// EARLIEST_EMAIL_RECEIVED_DATE compares against the UTC date.
var fixedNow = time.Date(2026, time.March, 15, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600))

var testLoader = Loader{Now: func() time.Time { return fixedNow }}

// validEnv is a complete, valid configuration whose secrets all carry
// secretMarker.
func validEnv() map[string]string {
	return map[string]string{
		"MAILFATHOM_DATABASE_URL":      "postgres://mailfathom@db.example.test:5432/mailfathom?sslmode=require",
		"MAILFATHOM_DATABASE_PASSWORD": "file:/run/secrets/SENTINEL-postgres",
		"MAILFATHOM_UI_PASSWORD":       "docker-secret:SENTINEL-ui",
		"MAILFATHOM_SYNC_ENABLED":      "true",

		"MAILFATHOM_ACCOUNTS_0_ID":                                     "primary",
		"MAILFATHOM_ACCOUNTS_0_HOST":                                   "imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME":                               "SENTINEL-user@example.test",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                               "systemd-credential:SENTINEL-imap-primary",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS":                        "inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE":                  "Inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS":                        "archive",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH":                  "Archief/2026",
		"MAILFATHOM_ACCOUNTS_1_ID":                                     "secondary",
		"MAILFATHOM_ACCOUNTS_1_HOST":                                   "mail.example.test",
		"MAILFATHOM_ACCOUNTS_1_USERNAME":                               "SENTINEL-second@example.test",
		"MAILFATHOM_ACCOUNTS_1_PASSWORD":                               "env:SENTINEL_IMAP_SECONDARY",
		"MAILFATHOM_ACCOUNTS_1_CERTIFICATE_TRUST":                      "AdditionalTrustedAuthority",
		"MAILFATHOM_ACCOUNTS_1_TRUSTED_CERTIFICATE_AUTHORITY":          "file:/etc/mailfathom/SENTINEL-ca.p12",
		"MAILFATHOM_ACCOUNTS_1_TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": "systemd-credential:SENTINEL-ca-password",
	}
}

// oauthAccount returns overrides that turn account 0 into a valid token
// account (no password, an OAuth block), with extra applied on top.
func oauthAccount(extra map[string]string) map[string]string {
	m := map[string]string{
		"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "OAUTHBEARER,XOAUTH2",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                            unset,
		"MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT":                "https://login.example.test/oauth2/v2.0/token?tenant=SENTINEL",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_ID":                     "file:/run/secrets/SENTINEL-client-id",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_SECRET":                 "systemd-credential:SENTINEL-client-secret",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN":                 "docker-secret:SENTINEL-refresh",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_SCOPE":                         "https://outlook.office.com/IMAP.AccessAsUser.All offline_access",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// environ renders base with overrides applied, in os.Environ form, sorted.
func environ(base map[string]string, overrides map[string]string) []string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range overrides {
		if v == unset {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// loadErr loads env, requires a *Error, checks that no secret leaked into
// it, and returns it.
func loadErr(t *testing.T, env []string) *Error {
	t.Helper()
	cfg, err := testLoader.Load(env)
	require.Error(t, err)
	require.Nil(t, cfg)
	var cerr *Error
	require.ErrorAs(t, err, &cerr)
	require.NotEmpty(t, cerr.Problems)
	require.NotContains(t, err.Error(), secretMarker, "an error leaked a secret value")
	require.Equal(t, len(cerr.Problems), strings.Count(err.Error(), "\n")+1)
	return cerr
}

// problemFor returns the problems reported on variable.
func problemsFor(e *Error, variable string) []Problem {
	var out []Problem
	for _, p := range e.Problems {
		if p.Variable == variable {
			out = append(out, p)
		}
	}
	return out
}

// embeddingProfile returns overrides that configure a valid embedding
// profile, with extra applied on top.
func embeddingProfile(extra map[string]string) map[string]string {
	m := map[string]string{
		"MAILFATHOM_EMBEDDING_PROVIDER_URL": "http://127.0.0.1:11434/v1",
		"MAILFATHOM_EMBEDDING_MODEL":        "nomic-embed-text",
		"MAILFATHOM_EMBEDDING_DIMENSIONS":   "768",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}
