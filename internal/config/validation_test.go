package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
)

// TestLoadRejects covers every kind of rule: each case starts from the valid
// environment, breaks one thing, and expects one problem on one variable.
// loadErr also checks that no secret value appears in the error.
func TestLoadRejects(t *testing.T) {
	t.Parallel()
	const (
		a0 = "MAILFATHOM_ACCOUNTS_0_"
		a1 = "MAILFATHOM_ACCOUNTS_1_"
	)
	tests := []struct {
		name      string
		overrides map[string]string
		variable  string
		contains  string
		rule      string
	}{
		// Integers, per bound kind.
		{"int below range", map[string]string{"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS": "0"}, "MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS", "from 1 to 100", ""},
		{"int above range", map[string]string{"MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT": "21"}, "MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT", "from 1 to 20", ""},
		{"int not a number", map[string]string{"MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE": "lots"}, "MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE", "from 1 to 1000", ""},
		{"int with unit", map[string]string{"MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES": "25MB"}, "MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES", "from 1024 to 1073741824", ""},
		{"raw mime below 1 KiB", map[string]string{"MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES": "1023"}, "MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES", "from 1024 to 1073741824", ""},
		{"raw mime above 1 GiB", map[string]string{"MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES": "1073741825"}, "MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES", "from 1024 to 1073741824", ""},
		{"batches per run", map[string]string{"MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN": "1001"}, "MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN", "from 1 to 1000", ""},
		{"reconciled per run", map[string]string{"MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN": "10001"}, "MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN", "from 1 to 10000", ""},
		{"mime part count", map[string]string{"MAILFATHOM_SYNC_MAX_MIME_PART_COUNT": "100001"}, "MAILFATHOM_SYNC_MAX_MIME_PART_COUNT", "from 1 to 100000", ""},
		{"mime nesting depth", map[string]string{"MAILFATHOM_SYNC_MAX_MIME_NESTING_DEPTH": "0"}, "MAILFATHOM_SYNC_MAX_MIME_NESTING_DEPTH", "from 1 to 1000", ""},
		{"extracted text ceiling", map[string]string{"MAILFATHOM_SYNC_MAX_EXTRACTED_TEXT_CHARACTERS": "200001"}, "MAILFATHOM_SYNC_MAX_EXTRACTED_TEXT_CHARACTERS", "from 1 to 200000", ""},
		{"push failures", map[string]string{"MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES": "101"}, "MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES", "from 1 to 100", ""},
		{"subscribed folders", map[string]string{"MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS": "101"}, "MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS", "from 1 to 100", ""},
		{"watch workers", map[string]string{"MAILFATHOM_QUEUE_WATCHES_WORKERS": "1001"}, "MAILFATHOM_QUEUE_WATCHES_WORKERS", "from 0 to 1000", ""},
		{"mutations per pass", map[string]string{"MAILFATHOM_SYNC_MAX_MUTATIONS_PER_CONVERGENCE_PASS": "0"}, "MAILFATHOM_SYNC_MAX_MUTATIONS_PER_CONVERGENCE_PASS", "from 1 to 1000", ""},
		{"mutation attempts", map[string]string{"MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS": "101"}, "MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS", "from 1 to 100", ""},
		{"account port zero", map[string]string{a0 + "PORT": "0"}, a0 + "PORT", "from 1 to 65535", ""},
		{"account port too high", map[string]string{a1 + "PORT": "65536"}, a1 + "PORT", "from 1 to 65535", ""},
		{"database port", map[string]string{"MAILFATHOM_DATABASE_URL": unset, "MAILFATHOM_DATABASE_HOST": "db", "MAILFATHOM_DATABASE_PORT": "70000"}, "MAILFATHOM_DATABASE_PORT", "from 1 to 65535", ""},
		{"pool too small", map[string]string{"MAILFATHOM_DATABASE_MAX_CONNECTIONS": "1"}, "MAILFATHOM_DATABASE_MAX_CONNECTIONS", "from 2 to 200", ""},
		{"pool too large", map[string]string{"MAILFATHOM_DATABASE_MAX_CONNECTIONS": "201"}, "MAILFATHOM_DATABASE_MAX_CONNECTIONS", "from 2 to 200", ""},
		{"queue workers", map[string]string{"MAILFATHOM_QUEUE_BACKFILL_WORKERS": "1001"}, "MAILFATHOM_QUEUE_BACKFILL_WORKERS", "from 0 to 1000", ""},
		{"embeddings queue without a profile", map[string]string{"MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS": "2"}, "MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS", "embedding is not configured: it needs MAILFATHOM_EMBEDDING_PROVIDER_URL", RuleFeatureNotAvailable},
		{"embedding setting without a provider", map[string]string{"MAILFATHOM_EMBEDDING_MAX_BACKLOG": "10"}, "MAILFATHOM_EMBEDDING_MAX_BACKLOG", "needs MAILFATHOM_EMBEDDING_PROVIDER_URL", ""},
		{"embedding URL scheme", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_PROVIDER_URL": "ftp://models.example.test/v1"}), "MAILFATHOM_EMBEDDING_PROVIDER_URL", "absolute http or https URL", ""},
		{"embedding URL credentials", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_PROVIDER_URL": "https://SENTINEL:SENTINEL@api.example.test/v1"}), "MAILFATHOM_EMBEDDING_PROVIDER_URL", "must not carry credentials", ""},
		{"embedding URL query", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_PROVIDER_URL": "https://api.example.test/v1?key=SENTINEL"}), "MAILFATHOM_EMBEDDING_PROVIDER_URL", "must not carry a query", ""},
		{"embedding model missing", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_MODEL": unset}), "MAILFATHOM_EMBEDDING_MODEL", "is required with MAILFATHOM_EMBEDDING_PROVIDER_URL", ""},
		{"embedding dimensions missing", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_DIMENSIONS": unset}), "MAILFATHOM_EMBEDDING_DIMENSIONS", "is required with MAILFATHOM_EMBEDDING_PROVIDER_URL", ""},
		{"embedding dimensions range", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_DIMENSIONS": "8193"}), "MAILFATHOM_EMBEDDING_DIMENSIONS", "from 1 to 8192", ""},
		{"embedding batch size", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_BATCH_SIZE": "0"}), "MAILFATHOM_EMBEDDING_BATCH_SIZE", "from 1 to 256", ""},
		{"embedding backlog", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_MAX_BACKLOG": "100001"}), "MAILFATHOM_EMBEDDING_MAX_BACKLOG", "from 1 to 100000", ""},
		{"embedding API key", embeddingProfile(map[string]string{"MAILFATHOM_EMBEDDING_API_KEY": "SENTINEL-key"}), "MAILFATHOM_EMBEDDING_API_KEY", "not a valid secret reference", ""},
		{"embeddings queue range", embeddingProfile(map[string]string{"MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS": "0"}), "MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS", "from 1 to 1000", ""},
		{"mutations queue", map[string]string{"MAILFATHOM_QUEUE_MUTATIONS_WORKERS": "1001"}, "MAILFATHOM_QUEUE_MUTATIONS_WORKERS", "from 0 to 1000", ""},
		{"AI provider budget without a profile", map[string]string{"MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_ATTEMPTS": "2"}, "MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_ATTEMPTS", "needs MAILFATHOM_EMBEDDING_PROVIDER_URL", RuleFeatureNotAvailable},
		{"AI provider budget with a profile", embeddingProfile(map[string]string{"MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_ATTEMPTS": "21"}), "MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_ATTEMPTS", "from 1 to 20", ""},
		{"queue workers negative", map[string]string{"MAILFATHOM_QUEUE_ACCOUNTS_WORKERS": "-1"}, "MAILFATHOM_QUEUE_ACCOUNTS_WORKERS", "from 0 to 1000", ""},
		{"commit attempts low", map[string]string{"MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS": "0"}, "MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS", "from 1 to 10", ""},
		{"commit attempts high", map[string]string{"MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS": "11"}, "MAILFATHOM_PERSISTENCE_MAXIMUM_CONCURRENCY_COMMIT_ATTEMPTS", "from 1 to 10", ""},
		{"backfill batch size", map[string]string{"MAILFATHOM_BACKFILL_BATCH_SIZE": "1001"}, "MAILFATHOM_BACKFILL_BATCH_SIZE", "from 1 to 1000", ""},
		{"backfill batches per run", map[string]string{"MAILFATHOM_BACKFILL_MAX_BATCHES_PER_RUN": "0"}, "MAILFATHOM_BACKFILL_MAX_BATCHES_PER_RUN", "from 1 to 1000", ""},
		{"MCP results", map[string]string{"MAILFATHOM_MCP_MAX_RESULTS": "0"}, "MAILFATHOM_MCP_MAX_RESULTS", "from 1 to 500", ""},
		{"MCP results not a number", map[string]string{"MAILFATHOM_MCP_MAX_RESULTS": "fifty"}, "MAILFATHOM_MCP_MAX_RESULTS", "from 1 to 500", ""},
		{"MCP characters", map[string]string{"MAILFATHOM_MCP_MAX_CHARACTERS": "99"}, "MAILFATHOM_MCP_MAX_CHARACTERS", "from 100 to 1000000", ""},

		// Durations, per bound kind.
		{"interval below range", map[string]string{"MAILFATHOM_SYNC_INTERVAL": "5s"}, "MAILFATHOM_SYNC_INTERVAL", "from 10s to 24h", ""},
		{"interval above range", map[string]string{"MAILFATHOM_SYNC_INTERVAL": "25h", "MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF": "48h"}, "MAILFATHOM_SYNC_INTERVAL", "from 10s to 24h", ""},
		{"duration without unit", map[string]string{"MAILFATHOM_SYNC_INTERVAL": "300"}, "MAILFATHOM_SYNC_INTERVAL", "Go duration", ""},
		{"duration in hh:mm:ss syntax", map[string]string{"MAILFATHOM_SYNC_INTERVAL": "00:05:00"}, "MAILFATHOM_SYNC_INTERVAL", "Go duration", ""},
		{"negative drain", map[string]string{"MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT": "-1s"}, "MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT", "from 0s to 2m", ""},
		{"drain above range", map[string]string{"MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT": "2m1s"}, "MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT", "from 0s to 2m", ""},
		{"renewal", map[string]string{"MAILFATHOM_SYNC_PUSH_RENEWAL_INTERVAL": "30m"}, "MAILFATHOM_SYNC_PUSH_RENEWAL_INTERVAL", "from 1m to 29m", ""},
		{"degradation period", map[string]string{"MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD": "9s"}, "MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD", "from 10s to 24h", ""},
		{"write idle period", map[string]string{"MAILFATHOM_SYNC_WRITE_CONNECTION_IDLE_PERIOD": "0"}, "MAILFATHOM_SYNC_WRITE_CONNECTION_IDLE_PERIOD", "from 1s to 1h", ""},
		{"unknown outcome grace", map[string]string{"MAILFATHOM_SYNC_UNKNOWN_MUTATION_OUTCOME_GRACE": "721h"}, "MAILFATHOM_SYNC_UNKNOWN_MUTATION_OUTCOME_GRACE", "from 1m to 720h", ""},
		{"backoff ceiling", map[string]string{"MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF": "169h"}, "MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF", "from 10s to 168h", ""},
		{"backoff shorter than interval", map[string]string{"MAILFATHOM_SYNC_INTERVAL": "10m", "MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF": "5m"}, "MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF", "(5m) must not be shorter than MAILFATHOM_SYNC_INTERVAL (10m)", ""},
		{"backfill interval", map[string]string{"MAILFATHOM_BACKFILL_INTERVAL": "500ms"}, "MAILFATHOM_BACKFILL_INTERVAL", "from 1s to 24h", ""},

		// Booleans and addresses.
		{"bool", map[string]string{"MAILFATHOM_SYNC_ENABLED": "yes"}, "MAILFATHOM_SYNC_ENABLED", "must be true or false", ""},
		{"account bool", map[string]string{a0 + "ALLOW_INSECURE_CONNECTION": "on"}, a0 + "ALLOW_INSECURE_CONNECTION", "must be true or false", ""},
		{"compression", map[string]string{a0 + "COMPRESSION": "true"}, a0 + "COMPRESSION", "Account 'primary': must be one of auto, on, off", ""},
		{"compression wrong case", map[string]string{a0 + "COMPRESSION": "Auto"}, a0 + "COMPRESSION", "did you mean auto?", ""},
		{"http addr without port", map[string]string{"MAILFATHOM_HTTP_ADDR": "localhost"}, "MAILFATHOM_HTTP_ADDR", "must be host:port", ""},
		{"http addr named port", map[string]string{"MAILFATHOM_HTTP_ADDR": "localhost:http"}, "MAILFATHOM_HTTP_ADDR", "numeric port", ""},
		{"ui username with colon", map[string]string{"MAILFATHOM_UI_USERNAME": "a:b"}, "MAILFATHOM_UI_USERNAME", "colon", ""},

		// Enumerations.
		{"mode", map[string]string{a0 + "MODE": "Pull"}, a0 + "MODE", "Account 'primary': must be one of Polling, Push", ""},
		{"mode wrong case", map[string]string{a0 + "MODE": "push"}, a0 + "MODE", "did you mean Push?", ""},
		{"mode number", map[string]string{a0 + "MODE": "1"}, a0 + "MODE", "must be one of Polling, Push", ""},
		{"disposition", map[string]string{a0 + "REMOTELY_DELETED_EMAIL_DISPOSITION": "Delete"}, a0 + "REMOTELY_DELETED_EMAIL_DISPOSITION", "must be one of RetainTombstone, EraseLocalCopy", ""},
		{"connection security", map[string]string{a0 + "CONNECTION_SECURITY": "Tls"}, a0 + "CONNECTION_SECURITY", "must be one of TlsOnConnect, StartTlsRequired, StartTlsWhenAvailable, Auto, None", ""},
		{"connection security number", map[string]string{a0 + "CONNECTION_SECURITY": "4"}, a0 + "CONNECTION_SECURITY", "must be one of TlsOnConnect", ""},
		{"certificate trust", map[string]string{a1 + "CERTIFICATE_TRUST": "System"}, a1 + "CERTIFICATE_TRUST", "must be one of SystemTrustStore, AdditionalTrustedAuthority", ""},
		{"special use", map[string]string{a0 + "FOLDERS_0_SPECIAL_USE": "Spam"}, a0 + "FOLDERS_0_SPECIAL_USE", "Account 'primary': folder 'INBOX': must be one of Inbox, Archive, Drafts, Sent, Junk, Trash, All, Flagged, Important", ""},
		{"special use wrong case", map[string]string{a0 + "FOLDERS_0_SPECIAL_USE": "INBOX"}, a0 + "FOLDERS_0_SPECIAL_USE", "did you mean Inbox?", ""},
		{"log format", map[string]string{"MAILFATHOM_LOG_FORMAT": "JSON"}, "MAILFATHOM_LOG_FORMAT", "must be one of json, text", ""},
		{"log level", map[string]string{"MAILFATHOM_LOG_LEVEL": "warning"}, "MAILFATHOM_LOG_LEVEL", "must be one of debug, info, warn, error", ""},
		{"sslmode", map[string]string{"MAILFATHOM_DATABASE_URL": unset, "MAILFATHOM_DATABASE_HOST": "db", "MAILFATHOM_DATABASE_SSLMODE": "on"}, "MAILFATHOM_DATABASE_SSLMODE", "must be one of disable, allow, prefer, require, verify-ca, verify-full", ""},
		{"text search configuration case", map[string]string{"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION": "English"}, "MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION", "simple, arabic, armenian, basque", ""},
		{"text search configuration unknown", map[string]string{"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION": "klingon"}, "MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION", "turkish, yiddish", ""},
		{"unsupported mechanism", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "PLAIN,SCRAM-SHA-3"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS",
			"item 2 ('SCRAM-SHA-3') is not a supported mechanism; supported names are PLAIN, LOGIN, CRAM-MD5, SCRAM-SHA-1, SCRAM-SHA-256, SCRAM-SHA-512, XOAUTH2, OAUTHBEARER", ""},
		// A registered mechanism MailFathom does not implement is refused,
		// never skipped: skipped, "SCRAM-SHA-256-PLUS,PLAIN" would mean PLAIN.
		{"channel-bound SCRAM beside PLAIN", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-256-PLUS,PLAIN"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS",
			"item 1 ('SCRAM-SHA-256-PLUS') names a mechanism MailFathom does not implement, which is refused rather than skipped so the allow-list never quietly means a weaker mechanism; supported names are PLAIN, LOGIN, CRAM-MD5, SCRAM-SHA-1, SCRAM-SHA-256, SCRAM-SHA-512, XOAUTH2, OAUTHBEARER [AuthenticationMechanismNotSupported]",
			imapx.RuleAuthenticationMechanismNotSupported},
		{"SCRAM-SHA-1-PLUS", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "scram-sha-1-plus"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "[AuthenticationMechanismNotSupported]", imapx.RuleAuthenticationMechanismNotSupported},
		{"SCRAM-SHA-512-PLUS", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-512-PLUS,SCRAM-SHA-512"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "[AuthenticationMechanismNotSupported]", imapx.RuleAuthenticationMechanismNotSupported},
		{"DIGEST-MD5", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "DIGEST-MD5,LOGIN"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "item 1 ('DIGEST-MD5') names a mechanism MailFathom does not implement", imapx.RuleAuthenticationMechanismNotSupported},
		{"NTLM", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "PLAIN,ntlm"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "item 2 ('ntlm') names a mechanism MailFathom does not implement", imapx.RuleAuthenticationMechanismNotSupported},
		{"empty mechanism item", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "PLAIN,,LOGIN"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "item 2 is empty", ""},
		{"mechanism list holding a secret", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "PLAIN,SENTINEL pass"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS", "item 2 is not a supported mechanism", ""},

		// Accounts.
		{"future earliest date", map[string]string{a1 + "EARLIEST_EMAIL_RECEIVED_DATE": "2026-03-17"}, a1 + "EARLIEST_EMAIL_RECEIVED_DATE", "Account 'secondary': the date is after today's UTC date (2026-03-16)", ""},
		{"download budget not a number", map[string]string{a0 + "MAX_DOWNLOAD_BYTES_PER_DAY": "2.5GB"}, a0 + "MAX_DOWNLOAD_BYTES_PER_DAY", "from 0 to 1125899906842624", ""},
		{"download budget negative", map[string]string{a0 + "MAX_DOWNLOAD_BYTES_PER_DAY": "-1"}, a0 + "MAX_DOWNLOAD_BYTES_PER_DAY", "from 0 to 1125899906842624", ""},
		{"download budget below the largest stored message", map[string]string{a0 + "MAX_DOWNLOAD_BYTES_PER_DAY": "1000000"}, a0 + "MAX_DOWNLOAD_BYTES_PER_DAY",
			"must be 0 (unlimited) or at least MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES (26214400)", ""},
		{"malformed earliest date", map[string]string{a0 + "EARLIEST_EMAIL_RECEIVED_DATE": "2024-1-1"}, a0 + "EARLIEST_EMAIL_RECEIVED_DATE", "YYYY-MM-DD", ""},
		{"impossible earliest date", map[string]string{a0 + "EARLIEST_EMAIL_RECEIVED_DATE": "2024-02-30"}, a0 + "EARLIEST_EMAIL_RECEIVED_DATE", "YYYY-MM-DD", ""},
		{"duplicate account id after normalization", map[string]string{a1 + "ID": " PRIMARY "}, a1 + "ID", "Account 'PRIMARY' has the same ID as account 0 (MAILFATHOM_ACCOUNTS_0_ID)", ""},
		{"blank account id", map[string]string{a1 + "ID": "   "}, a1 + "ID", "Account 1: an account ID is required", ""},
		{"missing host", map[string]string{a0 + "HOST": unset}, a0 + "HOST", "Account 'primary': a host is required", ""},
		{"missing username", map[string]string{a0 + "USERNAME": unset}, a0 + "USERNAME", "Account 'primary': a user name is required", ""},
		{"missing password", map[string]string{a0 + "PASSWORD": unset}, a0 + "PASSWORD", "a password secret reference is required", ""},
		{"missing password while disabled", map[string]string{"MAILFATHOM_SYNC_ENABLED": "false", a1 + "PASSWORD": unset}, a1 + "PASSWORD", "even while synchronization is disabled", ""},
		{"sync enabled without accounts", map[string]string{
			a0 + "ID": unset, a0 + "HOST": unset, a0 + "USERNAME": unset, a0 + "PASSWORD": unset,
			a0 + "FOLDERS_0_ALIAS": unset, a0 + "FOLDERS_0_SPECIAL_USE": unset, a0 + "FOLDERS_1_ALIAS": unset, a0 + "FOLDERS_1_REMOTE_PATH": unset,
			a1 + "ID": unset, a1 + "HOST": unset, a1 + "USERNAME": unset, a1 + "PASSWORD": unset,
			a1 + "CERTIFICATE_TRUST": unset, a1 + "TRUSTED_CERTIFICATE_AUTHORITY": unset, a1 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": unset,
		}, "MAILFATHOM_SYNC_ENABLED", "no account is configured", ""},

		// Folders.
		{"duplicate alias after normalization", map[string]string{a0 + "FOLDERS_1_ALIAS": " Inbox "}, a0 + "FOLDERS_1_ALIAS", "folder 'INBOX' repeats the alias of folder 0", ""},
		{"remote path and special use", map[string]string{a0 + "FOLDERS_1_SPECIAL_USE": "Archive"}, a0 + "FOLDERS_1_REMOTE_PATH", "folder 'ARCHIVE' names both", ""},
		{"neither remote path nor special use", map[string]string{a0 + "FOLDERS_1_REMOTE_PATH": unset, a0 + "FOLDERS_1_SPECIAL_USE": ""}, a0 + "FOLDERS_1_ALIAS", "folder 'ARCHIVE' names neither", ""},
		{"blank alias", map[string]string{a0 + "FOLDERS_1_ALIAS": " "}, a0 + "FOLDERS_1_ALIAS", "folder 1 has no alias", ""},

		// Secret references.
		{"password is not a reference", map[string]string{a0 + "PASSWORD": "SENTINEL-hunter2"}, a0 + "PASSWORD", "is not a valid secret reference", ""},
		{"password with colon is not a reference", map[string]string{a0 + "PASSWORD": "SENTINEL:hunter2"}, a0 + "PASSWORD", "scheme is not supported", ""},
		{"unknown scheme", map[string]string{"MAILFATHOM_DATABASE_PASSWORD": "vault:SENTINEL/pg"}, "MAILFATHOM_DATABASE_PASSWORD", "scheme is not supported", ""},
		{"empty target", map[string]string{"MAILFATHOM_UI_PASSWORD": "file:"}, "MAILFATHOM_UI_PASSWORD", "target after the scheme is empty", ""},
		{"env target reserved", map[string]string{a0 + "PASSWORD": "env:MAILFATHOM_SENTINEL"}, a0 + "PASSWORD", "must not name a MAILFATHOM_ variable", ""},
		{"credential name with path", map[string]string{a1 + "TRUSTED_CERTIFICATE_AUTHORITY": "systemd-credential:../SENTINEL"}, a1 + "TRUSTED_CERTIFICATE_AUTHORITY", "plain name", ""},
		{"malformed bundle password", map[string]string{a1 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": "SENTINEL"}, a1 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD", "is not a valid secret reference", ""},

		// Database.
		{"database URL with password", map[string]string{"MAILFATHOM_DATABASE_URL": "postgres://mailfathom:SENTINELpw@db.example.test/mailfathom"}, "MAILFATHOM_DATABASE_URL", "carries a password; remove it from the URL and set MAILFATHOM_DATABASE_PASSWORD", ""},
		{"database URL with password parameter", map[string]string{"MAILFATHOM_DATABASE_URL": "postgres://db.example.test/mailfathom?sslmode=require&password=SENTINELpw"}, "MAILFATHOM_DATABASE_URL", "carries a password", ""},
		{"database URL with empty password", map[string]string{"MAILFATHOM_DATABASE_URL": "postgres://mailfathom:@db.example.test/mailfathom"}, "MAILFATHOM_DATABASE_URL", "carries a password", ""},
		{"database URL unparsable with password", map[string]string{"MAILFATHOM_DATABASE_URL": "postgres://mailfathom:SENTINEL/pw@db.example.test/mailfathom"}, "MAILFATHOM_DATABASE_URL", "without a password", ""},
		{"database DSN instead of URL", map[string]string{"MAILFATHOM_DATABASE_URL": "host=db password=SENTINELpw"}, "MAILFATHOM_DATABASE_URL", "must be a URL", ""},
		{"database URL wrong scheme", map[string]string{"MAILFATHOM_DATABASE_URL": "mysql://db/SENTINEL"}, "MAILFATHOM_DATABASE_URL", "must be a URL", ""},
		{"database URL and parts", map[string]string{"MAILFATHOM_DATABASE_NAME": "other"}, "MAILFATHOM_DATABASE_NAME", "contradicts MAILFATHOM_DATABASE_URL", ""},
		{"database parts without host", map[string]string{"MAILFATHOM_DATABASE_URL": unset, "MAILFATHOM_DATABASE_USER": "mailfathom"}, "MAILFATHOM_DATABASE_HOST", "is required when the database is configured by its parts (MAILFATHOM_DATABASE_USER)", ""},
		{"embedded data dir with database", map[string]string{"MAILFATHOM_EMBEDDED_DATA_DIR": "/data"}, "MAILFATHOM_EMBEDDED_DATA_DIR", "contradicts the configured database", ""},
		{"database password without database", map[string]string{"MAILFATHOM_DATABASE_URL": unset}, "MAILFATHOM_DATABASE_PASSWORD", "no database is configured", ""},
		{"UI password required with database", map[string]string{"MAILFATHOM_UI_PASSWORD": unset}, "MAILFATHOM_UI_PASSWORD", "is required when a database is configured and the UI is enabled", ""},

		// Transport security rules.
		{"unencrypted without opt-in", map[string]string{a0 + "CONNECTION_SECURITY": "None", a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-256"}, a0 + "CONNECTION_SECURITY",
			"Account 'primary': An unencrypted connection requires MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION=true. [UnencryptedConnectionRequiresExplicitOptIn]", imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"opportunistic without opt-in", map[string]string{a0 + "CONNECTION_SECURITY": "Auto", a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "CRAM-MD5"}, a0 + "CONNECTION_SECURITY",
			"[UnencryptedConnectionRequiresExplicitOptIn]", imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"clear text without opt-in (default list)", map[string]string{a0 + "CONNECTION_SECURITY": "StartTlsWhenAvailable", a0 + "ALLOW_INSECURE_CONNECTION": "true"}, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS",
			"Account 'primary': Permitting PLAIN or LOGIN on a connection that can stay unencrypted requires MAILFATHOM_ACCOUNTS_0_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION=true. [ClearTextAuthenticationRequiresExplicitOptIn]", imapx.RuleClearTextAuthenticationRequiresExplicitOptIn},
		{"clear text opt-in does not replace insecure opt-in", map[string]string{a0 + "CONNECTION_SECURITY": "None", a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-1", a0 + "ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true"}, a0 + "CONNECTION_SECURITY",
			"[UnencryptedConnectionRequiresExplicitOptIn]", imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"trust anchor required", map[string]string{a1 + "TRUSTED_CERTIFICATE_AUTHORITY": unset, a1 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": unset}, a1 + "TRUSTED_CERTIFICATE_AUTHORITY",
			"Account 'secondary': MAILFATHOM_ACCOUNTS_1_CERTIFICATE_TRUST=AdditionalTrustedAuthority requires a trusted certificate authority in this variable. [TrustAnchorRequired]", RuleTrustAnchorRequired},
		{"trust anchor not expected", map[string]string{a1 + "CERTIFICATE_TRUST": "SystemTrustStore", a1 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": unset}, a1 + "TRUSTED_CERTIFICATE_AUTHORITY",
			"[TrustAnchorNotExpected]", RuleTrustAnchorNotExpected},
		{"bundle password without anchor", map[string]string{a0 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD": "file:/SENTINEL"}, a0 + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD",
			"[TrustAnchorPasswordWithoutTrustAnchor]", RuleTrustAnchorPasswordWithoutTrustAnchor},

		// The credential an allow-list needs.
		{"token account without OAuth block", map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2", a0 + "PASSWORD": unset}, a0 + "OAUTH_TOKEN_ENDPOINT",
			"Account 'primary': An allow-list of only XOAUTH2 and/or OAUTHBEARER requires an OAuth block: OAUTH_TOKEN_ENDPOINT, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET and OAUTH_REFRESH_TOKEN. [OAuthRequired]", RuleOAuthRequired},
		{"token account with a password", oauthAccount(map[string]string{a0 + "PASSWORD": "file:/run/SENTINEL"}), a0 + "PASSWORD",
			"Account 'primary': An allow-list of only XOAUTH2 and/or OAUTHBEARER authenticates with an access token and takes no password; remove it, or permit a password mechanism. [PasswordNotExpected]", RulePasswordNotExpected},
		{"OAuth block missing the client secret", oauthAccount(map[string]string{a0 + "OAUTH_CLIENT_SECRET": unset}), a0 + "OAUTH_CLIENT_SECRET",
			"Account 'primary': The OAuth block is incomplete: it needs a secret reference to the client secret too. [OAuthIncomplete]", RuleOAuthIncomplete},
		{"OAuth block missing the token endpoint", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": unset}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"it needs a token endpoint too. [OAuthIncomplete]", RuleOAuthIncomplete},
		{"password account with an OAuth block", map[string]string{a1 + "OAUTH_CLIENT_ID": "file:/SENTINEL"}, a1 + "OAUTH_CLIENT_ID",
			"Account 'secondary': An OAuth block is configured, but the allow-list permits a password mechanism, so the account authenticates with its password; permit only XOAUTH2 and/or OAUTHBEARER, or remove the OAuth block. [OAuthNotExpected]", RuleOAuthNotExpected},
		{"token mechanisms beside a password mechanism with an OAuth block", oauthAccount(map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2,PLAIN", a0 + "PASSWORD": "env:SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"[OAuthNotExpected]", RuleOAuthNotExpected},
		{"password account with a scope alone", map[string]string{a0 + "OAUTH_SCOPE": "mail"}, a0 + "OAUTH_SCOPE", "[OAuthNotExpected]", RuleOAuthNotExpected},
		{"password account missing its password names both credentials", map[string]string{a0 + "PASSWORD": unset, a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-256,XOAUTH2"}, a0 + "PASSWORD",
			"whose allow-list permits a password mechanism", ""},
		{"unparsable allow-list settles no credential", oauthAccount(map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2,OAUTH"}), a0 + "PERMITTED_AUTHENTICATION_MECHANISMS",
			"item 2 ('OAUTH') is not a supported mechanism", ""},

		// The OAuth block's own settings.
		{"plain http token endpoint", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "http://login.example.test/SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"must use https://; http:// is accepted only for a loopback host", ""},
		{"http token endpoint on a look-alike host", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "http://127.0.0.1.example.test/SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"must use https://", ""},
		{"relative token endpoint", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "/oauth2/SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"Account 'primary': the token endpoint must be an absolute https:// URL without a fragment", ""},
		{"token endpoint without a host", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "https:///SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"absolute https:// URL", ""},
		{"token endpoint with a fragment", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "https://login.example.test/token#SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"without a fragment", ""},
		{"token endpoint with user information", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "https://client:SENTINEL@login.example.test/token"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"must not carry user information", ""},
		{"token endpoint of another scheme", oauthAccount(map[string]string{a0 + "OAUTH_TOKEN_ENDPOINT": "ftp://login.example.test/SENTINEL"}), a0 + "OAUTH_TOKEN_ENDPOINT",
			"absolute https:// URL", ""},
		{"client secret is not a reference", oauthAccount(map[string]string{a0 + "OAUTH_CLIENT_SECRET": "SENTINEL-pasted-secret"}), a0 + "OAUTH_CLIENT_SECRET",
			"is not a valid secret reference", ""},
		{"refresh token with unknown scheme", oauthAccount(map[string]string{a0 + "OAUTH_REFRESH_TOKEN": "vault:SENTINEL"}), a0 + "OAUTH_REFRESH_TOKEN",
			"scheme is not supported", ""},
		{"client ID reference naming a MAILFATHOM_ variable", oauthAccount(map[string]string{a0 + "OAUTH_CLIENT_ID": "env:MAILFATHOM_SENTINEL"}), a0 + "OAUTH_CLIENT_ID",
			"must not name a MAILFATHOM_ variable", ""},
		{"scope with a quote", oauthAccount(map[string]string{a0 + "OAUTH_SCOPE": `mail "all"`}), a0 + "OAUTH_SCOPE",
			"(RFC 6749 §3.3)", ""},
		{"scope beyond ASCII", oauthAccount(map[string]string{a0 + "OAUTH_SCOPE": "mail lecture·écriture"}), a0 + "OAUTH_SCOPE",
			"printable ASCII", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := loadErr(t, environ(validEnv(), tt.overrides))
			require.Len(t, e.Problems, 1, e.Error())
			p := e.Problems[0]
			require.Equal(t, tt.variable, p.Variable, e.Error())
			require.Contains(t, p.String(), tt.contains)
			require.Equal(t, tt.rule, p.Rule)
			require.True(t, strings.HasPrefix(e.Error(), tt.variable+": "))
		})
	}
}

func TestLoadReportsEveryProblemTogether(t *testing.T) {
	t.Parallel()
	e := loadErr(t, environ(validEnv(), map[string]string{
		"MAILFATHOM_SYNC_INTERVALL":                          "5m",
		"MAILFATHOM_DATABASE_URL":                            "postgres://u:SENTINELpw@db/x",
		"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS":            "0",
		"MAILFATHOM_ACCOUNTS_0_MODE":                         "Pull",
		"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY":          "None",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                     "SENTINEL",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_SPECIAL_USE":        "Archive",
		"MAILFATHOM_ACCOUNTS_1_ID":                           "Primary",
		"MAILFATHOM_ACCOUNTS_1_EARLIEST_EMAIL_RECEIVED_DATE": "2099-01-01",
		"MAILFATHOM_ACCOUNTS_3_HOST":                         "x",
		"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION":   "English",
		"MAILFATHOM_BACKFILL_INTERVAL":                       "forever",
	}))
	var got []string
	for _, p := range e.Problems {
		got = append(got, p.Variable)
	}
	require.Equal(t, []string{
		"MAILFATHOM_ACCOUNTS_3_HOST",
		"MAILFATHOM_SYNC_INTERVALL",
		"MAILFATHOM_DATABASE_URL",
		"MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD",
		"MAILFATHOM_ACCOUNTS_0_MODE",
		"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY",
		"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH",
		"MAILFATHOM_ACCOUNTS_1_EARLIEST_EMAIL_RECEIVED_DATE",
		"MAILFATHOM_ACCOUNTS_1_ID",
		"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION",
		"MAILFATHOM_BACKFILL_INTERVAL",
	}, got, e.Error())
}

// TestCredentialShapeReportsEveryProblem checks that the credential rules
// report everything wrong with an account at once: a token account with a
// password and no block, and a block that names only its scope.
func TestCredentialShapeReportsEveryProblem(t *testing.T) {
	t.Parallel()
	const a0 = "MAILFATHOM_ACCOUNTS_0_"
	e := loadErr(t, environ(validEnv(), map[string]string{a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "OAUTHBEARER"}))
	require.Len(t, e.Problems, 2, e.Error())
	require.Equal(t, RulePasswordNotExpected, problemsFor(e, a0+"PASSWORD")[0].Rule)
	require.Equal(t, RuleOAuthRequired, problemsFor(e, a0+"OAUTH_TOKEN_ENDPOINT")[0].Rule)

	e = loadErr(t, environ(validEnv(), map[string]string{
		a0 + "PERMITTED_AUTHENTICATION_MECHANISMS": "OAUTHBEARER", a0 + "PASSWORD": unset, a0 + "OAUTH_SCOPE": "mail",
	}))
	require.Len(t, e.Problems, 4, e.Error())
	for _, name := range []string{"OAUTH_TOKEN_ENDPOINT", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET", "OAUTH_REFRESH_TOKEN"} {
		ps := problemsFor(e, a0+name)
		require.Len(t, ps, 1, name)
		require.Equal(t, RuleOAuthIncomplete, ps[0].Rule, name)
	}

	// Two token accounts missing different settings are each reported.
	env := environ(validEnv(), oauthAccount(map[string]string{
		a0 + "OAUTH_REFRESH_TOKEN":                                  unset,
		"MAILFATHOM_ACCOUNTS_1_PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2",
		"MAILFATHOM_ACCOUNTS_1_PASSWORD":                            unset,
		"MAILFATHOM_ACCOUNTS_1_OAUTH_TOKEN_ENDPOINT":                "https://id.example.test/token",
		"MAILFATHOM_ACCOUNTS_1_OAUTH_REFRESH_TOKEN":                 "env:SENTINEL_RT",
		"MAILFATHOM_ACCOUNTS_1_OAUTH_CLIENT_SECRET":                 "env:SENTINEL_CS",
	}))
	e = loadErr(t, env)
	var got []string
	for _, p := range e.Problems {
		got = append(got, p.String())
	}
	require.Equal(t, []string{
		"MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN: Account 'primary': The OAuth block is incomplete: it needs a secret reference to the refresh token too. [OAuthIncomplete]",
		"MAILFATHOM_ACCOUNTS_1_OAUTH_CLIENT_ID: Account 'secondary': The OAuth block is incomplete: it needs a secret reference to the client ID too. [OAuthIncomplete]",
	}, got)
}
