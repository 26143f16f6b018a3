package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/secret"
)

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{nil, {}, {"PATH=/usr/bin", "HOME=/root", "NOT_MAILFATHOM_SYNC_ENABLED=x", "MAILFATHOMX=1"}} {
		cfg, err := Load(env)
		require.NoError(t, err)
		require.Equal(t, &Config{
			Database: Database{MaxConnections: 10, EmbeddedDataDir: ".mailfathom/postgres"},
			HTTP:     HTTP{Addr: "127.0.0.1:8080"},
			UI:       UI{Enabled: true, Username: "admin"},
			Log:      Log{Format: LogFormatJSON, Level: LogLevelInfo},

			SecretInterpretationMode: ReferenceOnly,
			MigrateOnStart:           true,
			Queues:                   Queues{Accounts: 0, Folders: 0, Backfill: 1, Mutations: 1, Embeddings: 2},
			Sync: Sync{
				Enabled:                        false,
				Interval:                       5 * time.Minute,
				MaxFailureBackoff:              30 * time.Minute,
				MaxConcurrentAccounts:          4,
				MaxConcurrentFoldersPerAccount: 1,
				ShutdownDrainTimeout:           10 * time.Second,
				MaxMetadataBatchSize:           100,
				MaxRawMimeBytes:                26214400,
				MaxMetadataBatchesPerRun:       10,
				MaxReconciledEmailsPerRun:      500,
				MaxMimePartCount:               1000,
				MaxMimeNestingDepth:            30,
				MaxExtractedTextCharacters:     100000,
				PushRenewalInterval:            20 * time.Minute,
				MaxConsecutivePushFailures:     3,
				PushDegradationPeriod:          15 * time.Minute,
				MaxSubscribedFolders:           20,
				WriteConnectionIdlePeriod:      2 * time.Minute,
				MaxMutationsPerConvergencePass: 50,
				UnknownMutationOutcomeGrace:    6 * time.Hour,
				MaxMutationAttempts:            5,
			},
			Persistence: Persistence{MaximumConcurrencyCommitAttempts: 2, TextSearchConfiguration: "simple"},
			Backfill:    Backfill{Enabled: true, Interval: 30 * time.Second, BatchSize: 50, MaxBatchesPerRun: 10},
			Embedding:   Embedding{BatchSize: 16, MaxBacklog: 1000},
			MCP:         MCP{MaxResults: 50, MaxCharacters: 20000},
			Resilience:  Resilience(resilience.DefaultBudgets()),
		}, cfg)
		require.True(t, cfg.Database.Embedded())
		require.Empty(t, cfg.Database.ConnString())
		require.Empty(t, cfg.SecretReferences())
		require.Equal(t, Queues{Accounts: 4, Folders: 4, Backfill: 1, Mutations: 1, Watches: 1, Embeddings: 2}, cfg.EffectiveQueueWorkers())
	}
}

func TestLoadBlankValuesAreUnset(t *testing.T) {
	t.Parallel()
	cfg, err := Load([]string{"MAILFATHOM_SYNC_INTERVAL=", "MAILFATHOM_LOG_LEVEL=   ", "MAILFATHOM_DATABASE_URL=", "MAILFATHOM_UI_PASSWORD="})
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, cfg.Sync.Interval)
	require.Equal(t, LogLevelInfo, cfg.Log.Level)
	require.True(t, cfg.Database.Embedded())
	require.True(t, cfg.UI.Password.IsZero())
}

func TestLoadFullEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MAILFATHOM_DATABASE_HOST":            "db.internal",
		"MAILFATHOM_DATABASE_PORT":            "6432",
		"MAILFATHOM_DATABASE_NAME":            "mail",
		"MAILFATHOM_DATABASE_USER":            "mailfathom",
		"MAILFATHOM_DATABASE_SSLMODE":         "verify-full",
		"MAILFATHOM_DATABASE_PASSWORD":        "file:/run/secrets/SENTINEL-pg",
		"MAILFATHOM_DATABASE_MAX_CONNECTIONS": "25",
		"MAILFATHOM_HTTP_ADDR":                "0.0.0.0:9090",
		"MAILFATHOM_UI_ENABLED":               "true",
		"MAILFATHOM_UI_USERNAME":              "operator",
		"MAILFATHOM_UI_PASSWORD":              "docker-secret:SENTINEL-ui",
		"MAILFATHOM_MIGRATE_ON_START":         "false",
		"MAILFATHOM_LOG_FORMAT":               "text",
		"MAILFATHOM_LOG_LEVEL":                "debug",
		"MAILFATHOM_QUEUE_ACCOUNTS_WORKERS":   "3",
		"MAILFATHOM_QUEUE_FOLDERS_WORKERS":    "0",
		"MAILFATHOM_QUEUE_BACKFILL_WORKERS":   "2",

		"MAILFATHOM_SYNC_ENABLED":                            "true",
		"MAILFATHOM_SYNC_INTERVAL":                           "2m",
		"MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF":                "2m",
		"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS":            "8",
		"MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT": "3",
		"MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT":             "0",
		"MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE":            "200",
		"MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES":                 "52428800",
		"MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN":       "20",
		"MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN":      "1000",
		"MAILFATHOM_SYNC_MAX_MIME_PART_COUNT":                "500",
		"MAILFATHOM_SYNC_MAX_MIME_NESTING_DEPTH":             "20",
		"MAILFATHOM_SYNC_MAX_EXTRACTED_TEXT_CHARACTERS":      "200000",

		"MAILFATHOM_ACCOUNTS_0_ID":                                  "  Primary ",
		"MAILFATHOM_ACCOUNTS_0_HOST":                                "imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME":                            "SENTINEL@example.test",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                            "systemd-credential:SENTINEL-imap",
		"MAILFATHOM_ACCOUNTS_0_MODE":                                "Polling",
		"MAILFATHOM_ACCOUNTS_0_EARLIEST_EMAIL_RECEIVED_DATE":        "2026-03-16",
		"MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION":  "EraseLocalCopy",
		"MAILFATHOM_ACCOUNTS_0_COMPRESSION":                         "off",
		"MAILFATHOM_ACCOUNTS_0_MAX_DOWNLOAD_BYTES_PER_DAY":          "2400000000",
		"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY":                 "StartTlsRequired",
		"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "scram-sha-256, PLAIN,plain , Scram-Sha-256",
		"MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST":                   "AdditionalTrustedAuthority",
		"MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY":       "file:/etc/ca/SENTINEL.pem",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS":                     " inbox ",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE":               "Inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS":                     "Archive",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH":               "  Archief/2026 ",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_2_ALIAS":                     "sent",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_2_SPECIAL_USE":               "Sent",

		"MAILFATHOM_ACCOUNTS_1_ID":                                                          "legacy",
		"MAILFATHOM_ACCOUNTS_1_HOST":                                                        "10.0.0.5",
		"MAILFATHOM_ACCOUNTS_1_PORT":                                                        "1143",
		"MAILFATHOM_ACCOUNTS_1_USERNAME":                                                    "SENTINEL-legacy",
		"MAILFATHOM_ACCOUNTS_1_PASSWORD":                                                    "env:SENTINEL_LEGACY",
		"MAILFATHOM_ACCOUNTS_1_MODE":                                                        "Polling",
		"MAILFATHOM_ACCOUNTS_1_REMOTELY_DELETED_EMAIL_DISPOSITION":                          "RetainTombstone",
		"MAILFATHOM_ACCOUNTS_1_CONNECTION_SECURITY":                                         "None",
		"MAILFATHOM_ACCOUNTS_1_ALLOW_INSECURE_CONNECTION":                                   "true",
		"MAILFATHOM_ACCOUNTS_1_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true",
		"MAILFATHOM_ACCOUNTS_1_CERTIFICATE_TRUST":                                           "SystemTrustStore",

		"MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS": "3",
		"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION":           "english",

		"MAILFATHOM_BACKFILL_ENABLED":             "false",
		"MAILFATHOM_BACKFILL_INTERVAL":            "1m",
		"MAILFATHOM_BACKFILL_BATCH_SIZE":          "100",
		"MAILFATHOM_BACKFILL_MAX_BATCHES_PER_RUN": "5",

		"MAILFATHOM_MCP_MAX_RESULTS":    "20",
		"MAILFATHOM_MCP_MAX_CHARACTERS": "5000",

		"PATH":          "/usr/bin",
		"OTHER_SETTING": "ignored",
		"MAILFATHOMISH": "ignored: no underscore after the prefix",
	}
	cfg, err := testLoader.Load(environ(env, nil))
	require.NoError(t, err)

	require.Equal(t, Database{
		Host: "db.internal", Port: 6432, Name: "mail", User: "mailfathom", SSLMode: "verify-full",
		Password:       secret.Reference{Scheme: "file", Target: "/run/secrets/SENTINEL-pg"},
		MaxConnections: 25,
	}, cfg.Database)
	require.False(t, cfg.Database.Embedded())
	require.Equal(t, "postgres://mailfathom@db.internal:6432/mail?sslmode=verify-full", cfg.Database.ConnString())
	require.Equal(t, HTTP{Addr: "0.0.0.0:9090"}, cfg.HTTP)
	require.Equal(t, MCP{MaxResults: 20, MaxCharacters: 5000}, cfg.MCP)
	require.Equal(t, UI{Enabled: true, Username: "operator", Password: secret.Reference{Scheme: "docker-secret", Target: "SENTINEL-ui"}}, cfg.UI)
	require.False(t, cfg.MigrateOnStart)
	require.Equal(t, Log{Format: LogFormatText, Level: LogLevelDebug}, cfg.Log)
	require.Equal(t, Queues{Accounts: 3, Folders: 24, Backfill: 2, Mutations: 1, Watches: 1, Embeddings: 2}, cfg.EffectiveQueueWorkers())

	require.Equal(t, Sync{
		Enabled: true, Interval: 2 * time.Minute, MaxFailureBackoff: 2 * time.Minute,
		MaxConcurrentAccounts: 8, MaxConcurrentFoldersPerAccount: 3, ShutdownDrainTimeout: 0,
		MaxMetadataBatchSize: 200, MaxRawMimeBytes: 52428800, MaxMetadataBatchesPerRun: 20,
		MaxReconciledEmailsPerRun: 1000, MaxMimePartCount: 500, MaxMimeNestingDepth: 20,
		MaxExtractedTextCharacters: 200000, PushRenewalInterval: 20 * time.Minute,
		MaxConsecutivePushFailures: 3, PushDegradationPeriod: 15 * time.Minute, MaxSubscribedFolders: 20,
		WriteConnectionIdlePeriod: 2 * time.Minute, MaxMutationsPerConvergencePass: 50,
		UnknownMutationOutcomeGrace: 6 * time.Hour, MaxMutationAttempts: 5,
	}, cfg.Sync)

	require.Equal(t, []Account{
		{
			ID: "Primary", Host: "imap.example.test", Port: 143, Username: "SENTINEL@example.test",
			Password:                        secret.Reference{Scheme: "systemd-credential", Target: "SENTINEL-imap"},
			Mode:                            ModePolling,
			EarliestEmailReceivedDate:       time.Date(2026, time.March, 16, 0, 0, 0, 0, time.UTC),
			RemotelyDeletedEmailDisposition: EraseLocalCopy,
			Compression:                     imapx.CompressionOff,
			MaxDownloadBytesPerDay:          2_400_000_000,
			TransportSecurity: TransportSecurity{
				ConnectionSecurity:                imapx.StartTLSRequired,
				PermittedAuthenticationMechanisms: []sasl.Mechanism{sasl.ScramSHA256, sasl.Plain},
				CertificateTrust:                  AdditionalTrustedAuthority,
				TrustedCertificateAuthority:       secret.Reference{Scheme: "file", Target: "/etc/ca/SENTINEL.pem"},
			},
			Folders: []Folder{
				{Alias: "INBOX", SpecialUse: SpecialUseInbox},
				{Alias: "ARCHIVE", RemotePath: "Archief/2026"},
				{Alias: "SENT", SpecialUse: SpecialUseSent},
			},
		},
		{
			ID: "legacy", Host: "10.0.0.5", Port: 1143, Username: "SENTINEL-legacy",
			Password:                        secret.Reference{Scheme: "env", Target: "SENTINEL_LEGACY"},
			Mode:                            ModePolling,
			RemotelyDeletedEmailDisposition: RetainTombstone,
			Compression:                     imapx.CompressionAuto,
			TransportSecurity: TransportSecurity{
				ConnectionSecurity:                                    imapx.None,
				PermittedAuthenticationMechanisms:                     []sasl.Mechanism{sasl.Plain, sasl.Login},
				AllowInsecureConnection:                               true,
				AllowClearTextAuthenticationOverUnencryptedConnection: true,
				CertificateTrust:                                      SystemTrustStore,
			},
			Folders: DefaultFolders(),
		},
	}, cfg.Accounts)

	require.Equal(t, Persistence{MaximumConcurrencyCommitAttempts: 3, TextSearchConfiguration: "english"}, cfg.Persistence)
	require.Equal(t, Backfill{Enabled: false, Interval: time.Minute, BatchSize: 100, MaxBatchesPerRun: 5}, cfg.Backfill)

	require.Equal(t, []NamedReference{
		{"MAILFATHOM_DATABASE_PASSWORD", secret.Reference{Scheme: "file", Target: "/run/secrets/SENTINEL-pg"}},
		{"MAILFATHOM_UI_PASSWORD", secret.Reference{Scheme: "docker-secret", Target: "SENTINEL-ui"}},
		{"MAILFATHOM_ACCOUNTS_0_PASSWORD", secret.Reference{Scheme: "systemd-credential", Target: "SENTINEL-imap"}},
		{"MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY", secret.Reference{Scheme: "file", Target: "/etc/ca/SENTINEL.pem"}},
		{"MAILFATHOM_ACCOUNTS_1_PASSWORD", secret.Reference{Scheme: "env", Target: "SENTINEL_LEGACY"}},
	}, cfg.SecretReferences())
}

func TestLoadValidEnvironments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		overrides map[string]string
		check     func(t *testing.T, cfg *Config)
	}{
		{"base", nil, func(t *testing.T, cfg *Config) {
			require.Len(t, cfg.Accounts, 2)
			require.Equal(t, "postgres://mailfathom@db.example.test:5432/mailfathom?sslmode=require", cfg.Database.ConnString())
			require.Empty(t, cfg.Database.EmbeddedDataDir)
			require.Len(t, cfg.SecretReferences(), 6)
		}},
		{"default port follows connection security", map[string]string{
			"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY": "StartTlsRequired",
		}, func(t *testing.T, cfg *Config) {
			require.Equal(t, 143, cfg.Accounts[0].Port)
			require.Equal(t, 993, cfg.Accounts[1].Port)
		}},
		{"opportunistic mode with opt-in and challenge-response only", map[string]string{
			"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY":                 "StartTlsWhenAvailable",
			"MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION":           "true",
			"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-512,cram-md5",
		}, func(t *testing.T, cfg *Config) {
			require.Equal(t, []sasl.Mechanism{sasl.ScramSHA512, sasl.CramMD5}, cfg.Accounts[0].TransportSecurity.PermittedAuthenticationMechanisms)
		}},
		{"earliest date equal to today's UTC date", map[string]string{
			"MAILFATHOM_ACCOUNTS_0_EARLIEST_EMAIL_RECEIVED_DATE": "2026-03-16",
		}, func(t *testing.T, cfg *Config) {
			require.Equal(t, time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC), cfg.Accounts[0].EarliestEmailReceivedDate)
			require.True(t, cfg.Accounts[1].EarliestEmailReceivedDate.IsZero())
		}},
		{"sync disabled keeps accounts", map[string]string{"MAILFATHOM_SYNC_ENABLED": "false"}, func(t *testing.T, cfg *Config) {
			require.False(t, cfg.Sync.Enabled)
			require.Len(t, cfg.Accounts, 2)
		}},
		{"UI disabled needs no UI password", map[string]string{"MAILFATHOM_UI_ENABLED": "false", "MAILFATHOM_UI_PASSWORD": unset}, func(t *testing.T, cfg *Config) {
			require.False(t, cfg.UI.Enabled)
		}},
		{"embedded default needs no UI password", map[string]string{
			"MAILFATHOM_DATABASE_URL": unset, "MAILFATHOM_DATABASE_PASSWORD": unset, "MAILFATHOM_UI_PASSWORD": unset,
			"MAILFATHOM_EMBEDDED_DATA_DIR": "/var/lib/mailfathom/pg",
		}, func(t *testing.T, cfg *Config) {
			require.True(t, cfg.Database.Embedded())
			require.Equal(t, "/var/lib/mailfathom/pg", cfg.Database.EmbeddedDataDir)
		}},
		{"postgresql scheme and socket URL", map[string]string{"MAILFATHOM_DATABASE_URL": "postgresql:///mailfathom?host=/run/postgresql"}, func(t *testing.T, cfg *Config) {
			require.Equal(t, "postgresql:///mailfathom?host=/run/postgresql", cfg.Database.URL)
		}},
		{"bounds inclusive", map[string]string{
			"MAILFATHOM_SYNC_INTERVAL":                "10s",
			"MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF":     "168h",
			"MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT":  "2m",
			"MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES":      "1024",
			"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS": "100",
			"MAILFATHOM_ACCOUNTS_0_PORT":              "65535",
			"MAILFATHOM_QUEUE_FOLDERS_WORKERS":        "1000",
			"MAILFATHOM_HTTP_ADDR":                    ":0",
		}, func(t *testing.T, cfg *Config) {
			require.Equal(t, 10*time.Second, cfg.Sync.Interval)
			require.Equal(t, 65535, cfg.Accounts[0].Port)
		}},
		{"OAuth-only mechanisms take an OAuth block instead of a password", oauthAccount(nil), func(t *testing.T, cfg *Config) {
			a := cfg.Accounts[0]
			require.Equal(t, []sasl.Mechanism{sasl.OAuthBearer, sasl.XOAuth2}, a.TransportSecurity.PermittedAuthenticationMechanisms)
			require.True(t, a.TransportSecurity.TokenOnly())
			require.True(t, a.Password.IsZero())
			require.Equal(t, OAuth{
				TokenEndpoint: "https://login.example.test/oauth2/v2.0/token?tenant=SENTINEL",
				ClientID:      secret.Reference{Scheme: "file", Target: "/run/secrets/SENTINEL-client-id"},
				ClientSecret:  secret.Reference{Scheme: "systemd-credential", Target: "SENTINEL-client-secret"},
				RefreshToken:  secret.Reference{Scheme: "docker-secret", Target: "SENTINEL-refresh"},
				Scope:         "https://outlook.office.com/IMAP.AccessAsUser.All offline_access",
			}, a.OAuth)
			require.False(t, cfg.Accounts[1].TransportSecurity.TokenOnly())
			require.True(t, cfg.Accounts[1].OAuth.IsZero())
			var vars []string
			for _, r := range cfg.SecretReferences() {
				vars = append(vars, r.Variable)
			}
			require.Subset(t, vars, []string{
				"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_ID", "MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_SECRET", "MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN",
			})
			require.NotContains(t, vars, "MAILFATHOM_ACCOUNTS_0_PASSWORD")
			require.Len(t, vars, 8)
		}},
		{"one token mechanism, no scope, loopback http endpoint", oauthAccount(map[string]string{
			"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "xoauth2",
			"MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT":                "http://127.0.0.1:8443/token",
			"MAILFATHOM_ACCOUNTS_0_OAUTH_SCOPE":                         unset,
		}), func(t *testing.T, cfg *Config) {
			a := cfg.Accounts[0]
			require.Equal(t, []sasl.Mechanism{sasl.XOAuth2}, a.TransportSecurity.PermittedAuthenticationMechanisms)
			require.Equal(t, "http://127.0.0.1:8443/token", a.OAuth.TokenEndpoint)
			require.Empty(t, a.OAuth.Scope)
		}},
		{"token endpoint on localhost and ::1, scope normalized", oauthAccount(map[string]string{
			"MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT": "http://[::1]/token",
			"MAILFATHOM_ACCOUNTS_0_OAUTH_SCOPE":          "  mail   offline_access ",
		}), func(t *testing.T, cfg *Config) {
			require.Equal(t, "http://[::1]/token", cfg.Accounts[0].OAuth.TokenEndpoint)
			require.Equal(t, "mail offline_access", cfg.Accounts[0].OAuth.Scope)
		}},
		{"token mechanisms beside a password mechanism make a password account", map[string]string{
			"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2,SCRAM-SHA-256",
		}, func(t *testing.T, cfg *Config) {
			require.False(t, cfg.Accounts[0].TransportSecurity.TokenOnly())
			require.False(t, cfg.Accounts[0].Password.IsZero())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := testLoader.Load(environ(validEnv(), tt.overrides))
			require.NoError(t, err)
			tt.check(t, cfg)
		})
	}
}

func TestLoadUsesClockWhenUnset(t *testing.T) {
	t.Parallel()
	env := environ(validEnv(), map[string]string{"MAILFATHOM_ACCOUNTS_0_EARLIEST_EMAIL_RECEIVED_DATE": time.Now().UTC().AddDate(0, 0, 2).Format(DateLayout)})
	_, err := Load(env)
	require.Error(t, err)
	require.Contains(t, err.Error(), "MAILFATHOM_ACCOUNTS_0_EARLIEST_EMAIL_RECEIVED_DATE: Account 'primary'")
}

func TestLogLevelSlog(t *testing.T) {
	t.Parallel()
	require.Equal(t, "DEBUG", LogLevelDebug.Slog().String())
	require.Equal(t, "INFO", LogLevelInfo.Slog().String())
	require.Equal(t, "WARN", LogLevelWarn.Slog().String())
	require.Equal(t, "ERROR", LogLevelError.Slog().String())
}

func TestTrustAnchorInterpretationModes(t *testing.T) {
	t.Parallel()
	account := func(anchor string, mode string) []string {
		env := []string{
			"MAILFATHOM_ACCOUNTS_0_ID=primary",
			"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
			"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
			"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:/run/secrets/imap",
			"MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST=AdditionalTrustedAuthority",
			"MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY=" + anchor,
		}
		if mode != "" {
			env = append(env, "MAILFATHOM_SECRET_INTERPRETATION_MODE="+mode)
		}
		return env
	}
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB-inline-material\n-----END CERTIFICATE-----"

	// ReferenceOnly (the default): inline material is refused, without
	// echoing it.
	_, err := Load(account(pem, ""))
	require.ErrorContains(t, err, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")
	require.NotContains(t, err.Error(), "inline-material")

	// ReferenceOrInline: a reference stays a reference, anything else is
	// inline material and is not listed for resolution.
	cfg, err := Load(account("file:/run/secrets/ca.pem", "ReferenceOrInline"))
	require.NoError(t, err)
	require.Equal(t, "file", cfg.Accounts[0].TransportSecurity.TrustedCertificateAuthority.Scheme)
	cfg, err = Load(account(pem, "ReferenceOrInline"))
	require.NoError(t, err)
	require.Equal(t, pem, cfg.Accounts[0].TransportSecurity.TrustedCertificateAuthorityInline)
	for _, r := range cfg.SecretReferences() {
		require.NotContains(t, r.Variable, "TRUSTED_CERTIFICATE_AUTHORITY")
	}

	// InlineOnly: always material.
	cfg, err = Load(account("file:/looks/like/a/reference", "InlineOnly"))
	require.NoError(t, err)
	require.Equal(t, "file:/looks/like/a/reference", cfg.Accounts[0].TransportSecurity.TrustedCertificateAuthorityInline)

	_, err = Load(account(pem, "Inline"))
	require.ErrorContains(t, err, "MAILFATHOM_SECRET_INTERPRETATION_MODE")
}

// TestWatchWorkersFollowPushAccounts: by default a process has one watch
// worker per push account, so it can take every account's watch over, and
// at least one; a configured count is kept.
func TestWatchWorkersFollowPushAccounts(t *testing.T) {
	t.Parallel()
	env := validEnv()
	cfg, err := Load(environ(env, nil))
	require.NoError(t, err)
	require.Equal(t, 1, cfg.EffectiveQueueWorkers().Watches, "no push account")

	cfg, err = Load(environ(env, map[string]string{"MAILFATHOM_ACCOUNTS_0_MODE": "Push", "MAILFATHOM_ACCOUNTS_1_MODE": "Push"}))
	require.NoError(t, err)
	require.Equal(t, ModePush, cfg.Accounts[0].Mode)
	require.Equal(t, 2, cfg.EffectiveQueueWorkers().Watches)

	cfg, err = Load(environ(env, map[string]string{"MAILFATHOM_ACCOUNTS_0_MODE": "Push", "MAILFATHOM_QUEUE_WATCHES_WORKERS": "5"}))
	require.NoError(t, err)
	require.Equal(t, 5, cfg.EffectiveQueueWorkers().Watches)
}

func TestLoadEmbeddingProfile(t *testing.T) {
	t.Parallel()
	cfg, err := testLoader.Load(environ(validEnv(), embeddingProfile(map[string]string{
		"MAILFATHOM_EMBEDDING_PROVIDER_URL":                         "https://api.example.test/v1/",
		"MAILFATHOM_EMBEDDING_API_KEY":                              "file:/run/secrets/SENTINEL-embedding",
		"MAILFATHOM_EMBEDDING_BATCH_SIZE":                           "32",
		"MAILFATHOM_EMBEDDING_MAX_BACKLOG":                          "50",
		"MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS":                       "3",
		"MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_ATTEMPTS": "5",
	})))
	require.NoError(t, err)
	require.True(t, cfg.Embedding.Configured())
	require.Equal(t, "https://api.example.test/v1", cfg.Embedding.ProviderURL, "the trailing slash is dropped before /embeddings is appended")
	require.Equal(t, "nomic-embed-text", cfg.Embedding.Model)
	require.Equal(t, 768, cfg.Embedding.Dimensions)
	require.Equal(t, 32, cfg.Embedding.BatchSize)
	require.Equal(t, 50, cfg.Embedding.MaxBacklog)
	require.Equal(t, 3, cfg.EffectiveQueueWorkers().Embeddings)
	require.Equal(t, 5, cfg.Resilience[resilience.AiProviderInvocation].MaxAttempts)
	var named []string
	for _, r := range cfg.SecretReferences() {
		named = append(named, r.Variable)
	}
	require.Contains(t, named, "MAILFATHOM_EMBEDDING_API_KEY", "resolved at startup with the other secrets")
}
