package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/stretchr/testify/require"
)

// sentinel stands in for secret values: it must never reach any output.
const sentinel = "Sentinel-Secret-9f2c"

func runCmd(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, env, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestStartupRefusesBadConfiguration(t *testing.T) {
	t.Parallel()

	account := []string{
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=" + sentinel + "@example.test",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:/run/secrets/" + sentinel,
	}
	cases := []struct {
		name     string
		env      []string
		variable string
	}{
		{"UnknownVariable", []string{"MAILFATHOM_COLOUR=blue"}, "MAILFATHOM_COLOUR"},
		{"MisspelledVariable", []string{"MAILFATHOM_SYNC_INTERVALL=5m"}, "MAILFATHOM_SYNC_INTERVALL"},
		{"GapInAccountIndexes", append(account,
			"MAILFATHOM_ACCOUNTS_2_ID=third",
			"MAILFATHOM_ACCOUNTS_2_HOST=imap.example.test",
			"MAILFATHOM_ACCOUNTS_2_USERNAME=u",
			"MAILFATHOM_ACCOUNTS_2_PASSWORD=file:/run/secrets/"+sentinel), "MAILFATHOM_ACCOUNTS_2_ID"},
		{"OutOfRangeBound", []string{"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS=101"}, "MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS"},
		{"BadEnumerationName", append(account, "MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION=Erase"), "MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION"},
		{"PasswordInDatabaseURL", []string{"MAILFATHOM_DATABASE_URL=postgres://u:" + sentinel + "@db/mailfathom"}, "MAILFATHOM_DATABASE_URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, cmd := range []string{"serve", "check-config", "migrate", "mcp"} {
				code, stdout, stderr := runCmd(t, tc.env, cmd)
				require.Equal(t, 1, code, cmd)
				require.Contains(t, stderr, tc.variable, cmd)
				require.NotContains(t, stderr+stdout, sentinel, cmd)
				if cmd == "mcp" {
					require.Empty(t, stdout, "stdout is the protocol's channel: the refusal goes to stderr")
				}
			}
		})
	}
}

func TestStartupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd(t, []string{
		"MAILFATHOM_COLOUR=blue",
		"MAILFATHOM_SYNC_INTERVAL=soon",
		"MAILFATHOM_BACKFILL_BATCH_SIZE=0",
	}, "check-config")
	require.Equal(t, 1, code)
	for _, v := range []string{"MAILFATHOM_COLOUR", "MAILFATHOM_SYNC_INTERVAL", "MAILFATHOM_BACKFILL_BATCH_SIZE"} {
		require.Contains(t, stderr, v)
	}
}

func TestUnresolvableSecretsFailStartupTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, []string{
		"MAILFATHOM_DATABASE_URL=postgres://mailfathom@127.0.0.1:1/mailfathom",
		"MAILFATHOM_DATABASE_PASSWORD=file:" + filepath.Join(dir, sentinel),
		"MAILFATHOM_UI_PASSWORD=file:" + filepath.Join(dir, "missing-too"),
	}, "serve")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "MAILFATHOM_DATABASE_PASSWORD")
	require.Contains(t, stderr, "MAILFATHOM_UI_PASSWORD")
	require.Contains(t, stderr, "[SecretNotResolvable]")
	require.NotContains(t, stderr+stdout, sentinel)
}

func TestCheckConfigAcceptsValidEnvironment(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "imap")
	require.NoError(t, os.WriteFile(pw, []byte(sentinel+"\n"), 0o600))
	code, stdout, stderr := runCmd(t, []string{
		"MAILFATHOM_SYNC_ENABLED=true",
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
	}, "check-config")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "1 account(s)")
	require.NotContains(t, stdout+stderr, sentinel)
}

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	code, _, _ := runCmd(t, nil, "probe", srv.URL+"/readyz")
	require.Equal(t, 0, code)
	code, _, stderr := runCmd(t, nil, "probe", srv.URL+"/other")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "503")
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd(t, nil, "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "usage")
}

func TestUnloadableTrustAnchorFailsStartup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filepath.Join(dir, "imap")
	anchor := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(pw, []byte(sentinel), 0o600))
	require.NoError(t, os.WriteFile(anchor, []byte("not a certificate "+sentinel), 0o600))
	code, stdout, stderr := runCmd(t, []string{
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
		"MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST=AdditionalTrustedAuthority",
		"MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY=file:" + anchor,
	}, "check-config")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")
	require.Contains(t, stderr, "[EncodingNotRecognized]")
	require.NotContains(t, stdout+stderr, sentinel)
}

// Durations reach the log as Go duration strings, as configuration writes
// them, in both formats.
func TestLogDurationsAsText(t *testing.T) {
	t.Parallel()
	for _, format := range []config.LogFormat{config.LogFormatJSON, config.LogFormatText} {
		var out bytes.Buffer
		cfg := &config.Config{Log: config.Log{Format: format, Level: config.LogLevelInfo}}
		newLogger(cfg, &out).Info("waited", slog.Duration("next_run_in", 90*time.Second))
		require.Contains(t, out.String(), "1m30s", format)
		require.NotContains(t, out.String(), "90000000000", format)
	}
}
