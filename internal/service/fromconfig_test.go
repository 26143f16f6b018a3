package service_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/service"
)

// TestCheckSecretsResolvesOAuthReferences: a token account's client ID,
// client secret and refresh token are resolved at startup like a password,
// every failure is reported at once by variable and failure identity, and
// no material or reference target appears in the report.
func TestCheckSecretsResolvesOAuthReferences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const (
		clientID     = "SENTINEL-client-id-7d1f"
		clientSecret = "SENTINEL-client-secret-a93b"
		refreshToken = "SENTINEL-refresh-token-0c55"
	)
	write := func(name, value string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(value+"\n"), 0o600))
	}
	write("client-id", clientID)
	write("client-secret", clientSecret)
	write("refresh-token", refreshToken)
	load := func(environ ...string) *config.Config {
		cfg, err := config.Load(append([]string{
			"MAILFATHOM_ACCOUNTS_0_ID=token-account",
			"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
			"MAILFATHOM_ACCOUNTS_0_USERNAME=user@example.test",
			"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS=OAUTHBEARER,XOAUTH2",
			"MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT=https://login.example.test/token",
			"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_ID=file:" + filepath.Join(dir, "client-id"),
			"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_SECRET=file:" + filepath.Join(dir, "client-secret"),
			"MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN=file:" + filepath.Join(dir, "refresh-token"),
		}, environ...))
		require.NoError(t, err)
		return cfg
	}

	// Synchronization stays disabled: secrets are checked all the same.
	_, err := service.CheckSecrets(context.Background(), load(), &secret.Resolver{})
	require.NoError(t, err)

	require.NoError(t, os.Remove(filepath.Join(dir, "client-secret")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "refresh-token"), nil, 0o600))
	_, err = service.CheckSecrets(context.Background(), load(), &secret.Resolver{})
	var serr *service.SecretsError
	require.True(t, errors.As(err, &serr), "%v", err)
	require.Equal(t, []string{
		"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_SECRET: the secret reference does not resolve: the referenced file could not be opened (it does not exist) [SecretNotResolvable]",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN: the secret reference does not resolve: the referenced material is empty [SecretNotResolvable]",
	}, serr.Problems)
	for _, s := range []string{clientID, clientSecret, refreshToken, dir, "SENTINEL"} {
		require.NotContains(t, err.Error(), s)
	}
}
