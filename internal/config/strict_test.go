package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		variable string
		message  string
	}{
		{"unknown", map[string]string{"MAILFATHOM_FROBNICATE": "1"}, "MAILFATHOM_FROBNICATE", "is not a MailFathom variable"},
		{"misspelled", map[string]string{"MAILFATHOM_SYNC_INTERVALL": "5m"}, "MAILFATHOM_SYNC_INTERVALL", "is not a MailFathom variable; did you mean MAILFATHOM_SYNC_INTERVAL?"},
		{"singular mechanism", map[string]string{"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISM": "SCRAM-SHA-256"}, "MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISM", "did you mean MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS?"},
		{"singular accounts keeps index", map[string]string{"MAILFATHOM_ACCOUNT_1_HOST": "x"}, "MAILFATHOM_ACCOUNT_1_HOST", "did you mean MAILFATHOM_ACCOUNTS_1_HOST?"},
		{"folder keeps both indexes", map[string]string{"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIASES": "x"}, "MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIASES", "did you mean MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS?"},
		{"misspelled secret variable hides its value", map[string]string{"MAILFATHOM_ACCOUNTS_1_PASWORD": "file:/SENTINEL"}, "MAILFATHOM_ACCOUNTS_1_PASWORD", "did you mean MAILFATHOM_ACCOUNTS_1_PASSWORD?"},
		{"retired compression switch", map[string]string{"MAILFATHOM_ACCOUNTS_1_COMPRESSION_ENABLED": "false"}, "MAILFATHOM_ACCOUNTS_1_COMPRESSION_ENABLED",
			"is no longer read: COMPRESSION (auto, on or off) replaced it: true was on, false is off, and the default is now auto; did you mean MAILFATHOM_ACCOUNTS_1_COMPRESSION?"},
		{"backfill", map[string]string{"MAILFATHOM_BACKFILL_ENABLE": "false"}, "MAILFATHOM_BACKFILL_ENABLE", "did you mean MAILFATHOM_BACKFILL_ENABLED?"},
		{"OAuth variable without its separator", map[string]string{"MAILFATHOM_ACCOUNTS_1_OAUTH_CLIENTSECRET": "file:/SENTINEL"}, "MAILFATHOM_ACCOUNTS_1_OAUTH_CLIENTSECRET", "did you mean MAILFATHOM_ACCOUNTS_1_OAUTH_CLIENT_SECRET?"},
		{"OAuth variable outside its block", map[string]string{"MAILFATHOM_ACCOUNTS_0_TOKEN_ENDPOINT": "https://id.example.test/token"}, "MAILFATHOM_ACCOUNTS_0_TOKEN_ENDPOINT", "did you mean MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT?"},
		{"wrong case", map[string]string{"mailfathom_sync_enabled": "true"}, "mailfathom_sync_enabled", "names are case-sensitive and start with MAILFATHOM_; did you mean MAILFATHOM_SYNC_ENABLED?"},
		{"account gap", map[string]string{"MAILFATHOM_ACCOUNTS_3_ID": "third"}, "MAILFATHOM_ACCOUNTS_3_ID",
			"account index 3 follows a gap: indexes must be 0, 1, 2, … without gaps, and no MAILFATHOM_ACCOUNTS_2_* variable is set"},
		{"folder gap", map[string]string{"MAILFATHOM_ACCOUNTS_0_FOLDERS_3_ALIAS": "x"}, "MAILFATHOM_ACCOUNTS_0_FOLDERS_3_ALIAS",
			"folder index 3 of account 0 follows a gap: indexes must be 0, 1, 2, … without gaps, and no MAILFATHOM_ACCOUNTS_0_FOLDERS_2_* variable is set"},
		{"folder gap in account without folders", map[string]string{"MAILFATHOM_ACCOUNTS_1_FOLDERS_1_SPECIAL_USE": "Sent"}, "MAILFATHOM_ACCOUNTS_1_FOLDERS_1_SPECIAL_USE",
			"folder index 1 of account 1 follows a gap"},
		{"account index with leading zero", map[string]string{"MAILFATHOM_ACCOUNTS_01_ID": "x"}, "MAILFATHOM_ACCOUNTS_01_ID", "account index 01 is not written as a plain number"},
		{"folder index with leading zero", map[string]string{"MAILFATHOM_ACCOUNTS_0_FOLDERS_00_ALIAS": "x"}, "MAILFATHOM_ACCOUNTS_0_FOLDERS_00_ALIAS", "folder index 00 of account 0 is not written as a plain number"},
		{"empty unknown variable", map[string]string{"MAILFATHOM_SYNC_ENABLE": ""}, "MAILFATHOM_SYNC_ENABLE", "did you mean MAILFATHOM_SYNC_ENABLED?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := loadErr(t, environ(validEnv(), tt.env))
			require.Len(t, e.Problems, 1, e.Error())
			require.Equal(t, tt.variable, e.Problems[0].Variable)
			require.Contains(t, e.Problems[0].Message, tt.message)
			require.Empty(t, e.Problems[0].Rule)
		})
	}
}

func TestGapReportsEveryVariablePastIt(t *testing.T) {
	t.Parallel()
	e := loadErr(t, []string{
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=SENTINEL",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=env:SENTINEL",
		"MAILFATHOM_ACCOUNTS_2_ID=third",
		"MAILFATHOM_ACCOUNTS_2_PASSWORD=file:/SENTINEL",
		"MAILFATHOM_ACCOUNTS_2_FOLDERS_0_ALIAS=inbox",
	})
	require.Len(t, e.Problems, 3, e.Error())
	for _, p := range e.Problems {
		require.Contains(t, p.Message, "account index 2 follows a gap")
		require.Contains(t, p.Message, "no MAILFATHOM_ACCOUNTS_1_* variable is set")
	}
}

func TestGapWithoutFirstAccount(t *testing.T) {
	t.Parallel()
	e := loadErr(t, []string{"MAILFATHOM_ACCOUNTS_1_ID=second"})
	require.Len(t, e.Problems, 1)
	require.Contains(t, e.Error(), "MAILFATHOM_ACCOUNTS_1_ID: account index 1 follows a gap: indexes must be 0, 1, 2, … without gaps, and no MAILFATHOM_ACCOUNTS_0_* variable is set")
}

func TestNonPrefixedVariablesIgnored(t *testing.T) {
	t.Parallel()
	cfg, err := Load([]string{
		"PATH=/usr/bin", "MAILFATHOMX_SYNC_ENABLED=true", "XMAILFATHOM_SYNC_ENABLED=true",
		"MAILFATHOM", "=weird", "MAILFATHOM_SYNC_ENABLED=false", "MAILFATHOM_SYNC_ENABLED=true",
	})
	require.NoError(t, err)
	require.False(t, cfg.Sync.Enabled, "the first occurrence of a name wins, as with os.Getenv")
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, editDistance("", ""))
	require.Equal(t, 3, editDistance("abc", ""))
	require.Equal(t, 3, editDistance("kitten", "sitting"))
	require.Equal(t, 1, editDistance("INTERVAL", "INTERVALL"))
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	require.Equal(t, "MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS", suggest("MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNT"))
	require.Equal(t, "MAILFATHOM_ACCOUNTS_12_FOLDERS_7_REMOTE_PATH", suggest("MAILFATHOM_ACCOUNTS_12_FOLDERS_7_REMOTEPATH"))
	require.Equal(t, "MAILFATHOM_ACCOUNTS_0_ID", suggest("MAILFATHOM_ACCOUNTS_ID"))
	require.Empty(t, suggest("MAILFATHOM_COMPLETELY_DIFFERENT_THING"))
}
