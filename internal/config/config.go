// Package config loads MailFathom's configuration from MAILFATHOM_
// environment variables.
//
// Binding is strict: a MAILFATHOM_ variable the configuration does not read
// is an error, as is any value that does not convert, lies outside its range,
// or contradicts another. Every problem is collected and reported together in
// one *Error, each attributed to its variable, and no error ever contains the
// value of a secret reference or the database URL. REFERENCE.md lists every
// variable with its default and range.
//
// Secret-bearing variables hold <scheme>:<target> references (see package
// secret), which Load only checks for syntax; startup resolves the references
// SecretReferences lists.
package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// Prefix is the prefix of every variable this package reads.
const Prefix = "MAILFATHOM_"

// Config is the validated configuration. Load returns one only when every
// variable converted and every rule held.
type Config struct {
	// Database is where MailFathom keeps its copy: an external PostgreSQL
	// server or, when none is configured, the embedded default.
	Database Database
	// HTTP is the listener serving River UI, /metrics, /healthz and /readyz.
	HTTP HTTP
	// UI is River UI and its basic authentication.
	UI UI
	// Log is the process log's format and level.
	Log Log
	// SecretInterpretationMode is MAILFATHOM_SECRET_INTERPRETATION_MODE:
	// whether a trusted certificate authority is given as a secret
	// reference, as the PEM text itself, or either. Default ReferenceOnly.
	SecretInterpretationMode InterpretationMode
	// MigrateOnStart is MAILFATHOM_MIGRATE_ON_START: whether serve applies
	// the schema and River migrations before starting. Default true.
	MigrateOnStart bool
	// Queues holds the River worker count per queue as configured; 0 means
	// derived. EffectiveQueueWorkers resolves them.
	Queues Queues
	// Sync is the MailSynchronization section (MAILFATHOM_SYNC_*).
	Sync Sync
	// Accounts are the configured IMAP accounts (MAILFATHOM_ACCOUNTS_<i>_*),
	// in index order. Empty by default.
	Accounts []Account
	// Persistence is the Persistence section (MAILFATHOM_PERSISTENCE_*).
	Persistence Persistence
	// Backfill is the MailExtractionBackfill section (MAILFATHOM_BACKFILL_*).
	Backfill Backfill
	// Resilience is the budget of every outbound dependency class
	// (MAILFATHOM_RESILIENCE_<CLASS>_<SETTING>), from which package
	// resilience builds its pipelines.
	Resilience Resilience
	// Embedding is the embedding profile (MAILFATHOM_EMBEDDING_*); without
	// one nothing is embedded.
	Embedding Embedding
	// MCP bounds the answers of the Model Context Protocol tools
	// (MAILFATHOM_MCP_*).
	MCP MCP
}

// NamedReference is a configured secret reference together with the
// variable that holds it, which is how a resolution failure is reported.
type NamedReference struct {
	// Variable is the environment variable holding the reference.
	Variable string
	// Ref is the parsed reference.
	Ref secret.Reference
}

// SecretReferences lists every configured secret reference, so startup can
// resolve them all before anything starts and report every failure at once.
// Account references are listed whether or not synchronization is enabled.
func (c *Config) SecretReferences() []NamedReference {
	var refs []NamedReference
	add := func(variable string, ref secret.Reference) {
		if !ref.IsZero() {
			refs = append(refs, NamedReference{Variable: variable, Ref: ref})
		}
	}
	add(Prefix+"DATABASE_PASSWORD", c.Database.Password)
	add(Prefix+"UI_PASSWORD", c.UI.Password)
	add(Prefix+"EMBEDDING_API_KEY", c.Embedding.APIKey)
	for i, a := range c.Accounts {
		add(accountVar(i, "PASSWORD"), a.Password)
		add(accountVar(i, "TRUSTED_CERTIFICATE_AUTHORITY"), a.TransportSecurity.TrustedCertificateAuthority)
		add(accountVar(i, "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD"), a.TransportSecurity.TrustedCertificateAuthorityPassword)
		add(accountVar(i, "OAUTH_CLIENT_ID"), a.OAuth.ClientID)
		add(accountVar(i, "OAUTH_CLIENT_SECRET"), a.OAuth.ClientSecret)
		add(accountVar(i, "OAUTH_REFRESH_TOKEN"), a.OAuth.RefreshToken)
	}
	return refs
}

// Loader loads configuration. The zero value is ready to use.
type Loader struct {
	// Now returns the current time; nil means time.Now. Its UTC date is
	// what an account's EARLIEST_EMAIL_RECEIVED_DATE must not exceed.
	Now func() time.Time
}

// Load reads the configuration from environ, given in os.Environ form
// ("NAME=value"). It does not consult the process environment. Variables
// without the MAILFATHOM_ prefix are ignored. Surrounding white space is
// trimmed from every value, and a blank value is the same as an unset one.
//
// On any problem Load returns a nil *Config and an *Error listing them all.
func Load(environ []string) (*Config, error) { return Loader{}.Load(environ) }

// Load is the package-level Load with l's clock.
func (l Loader) Load(environ []string) (*Config, error) {
	vars, caseMismatches := collect(environ)
	raw, read, err := bind(vars)
	if err != nil {
		return nil, fmt.Errorf("config: binding environment: %w", err)
	}

	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	c := &converter{set: map[string]bool{}, now: now()}
	for k, v := range vars {
		if v != "" {
			c.set[k] = true
		}
	}

	cfg := &Config{}
	cfg.Database = convertDatabase(c, raw.Database)
	convertService(c, raw.Service, cfg)
	cfg.Sync = convertSync(c, raw.Sync)
	cfg.Accounts = convertAccounts(c, raw.Accounts)
	cfg.Persistence = convertPersistence(c, raw.Persistence)
	cfg.Backfill = convertBackfill(c, raw.Backfill)
	cfg.Resilience = convertResilience(c, raw.Resilience)
	cfg.Embedding = convertEmbedding(c, raw.Embedding)
	cfg.MCP = convertMCP(c, raw.MCP)
	crossCheck(c, cfg, raw)
	refuseUnavailable(c)

	problems := unknownVariables(vars, caseMismatches, read, raw)
	problems = append(problems, c.problems...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return cfg, nil
}

// rawConfig is the binding stage: every field is a string, so binding never
// fails and never reports a value, and the typed conversion attributes each
// problem to its variable. Defaults live in the envDefault tags.
type rawConfig struct {
	Database    rawDatabase
	Service     rawService
	Sync        rawSync        `envPrefix:"SYNC_"`
	Accounts    []rawAccount   `envPrefix:"ACCOUNTS_"`
	Persistence rawPersistence `envPrefix:"PERSISTENCE_"`
	Backfill    rawBackfill    `envPrefix:"BACKFILL_"`
	Resilience  rawResilience  `envPrefix:"RESILIENCE_"`
	Embedding   rawEmbedding   `envPrefix:"EMBEDDING_"`
	MCP         rawMCP         `envPrefix:"MCP_"`
}

// collect returns the MAILFATHOM_ variables of environ with trimmed values
// (the first occurrence of a name wins, as with os.Getenv), and the names
// that carry the prefix in another case.
func collect(environ []string) (vars map[string]string, caseMismatches []string) {
	vars = map[string]string{}
	seen := map[string]bool{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, Prefix):
			if _, dup := vars[k]; !dup {
				vars[k] = strings.TrimSpace(v)
			}
		case len(k) >= len(Prefix) && strings.EqualFold(k[:len(Prefix)], Prefix):
			if !seen[k] {
				seen[k] = true
				caseMismatches = append(caseMismatches, k)
			}
		}
	}
	sort.Strings(caseMismatches)
	return vars, caseMismatches
}

// bind runs caarlos0/env over vars and records every key it read, set or
// not, which is what strictness compares against.
func bind(vars map[string]string) (rawConfig, map[string]bool, error) {
	read := map[string]bool{}
	raw, err := bindRaw(vars, func(key string, _ any, _ bool) { read[key] = true })
	return raw, read, err
}

// bindRaw binds vars, which must not be nil (caarlos0/env would read the
// process environment instead), calling onSet for every key it reads.
func bindRaw(vars map[string]string, onSet env.OnSetFn) (rawConfig, error) {
	var raw rawConfig
	err := env.ParseWithOptions(&raw, env.Options{Environment: vars, Prefix: Prefix, OnSet: onSet})
	return raw, err
}

// crossCheck enforces the rules that span sections.
func crossCheck(c *converter, cfg *Config, raw rawConfig) {
	if cfg.Sync.Enabled && len(raw.Accounts) == 0 {
		c.add(Prefix+"SYNC_ENABLED", "synchronization is enabled but no account is configured; configure MAILFATHOM_ACCOUNTS_0_ID, _HOST, _USERNAME and _PASSWORD (or an OAuth block), or disable synchronization")
	}
	for i, a := range cfg.Accounts {
		if b := a.MaxDownloadBytesPerDay; b > 0 && cfg.Sync.MaxRawMimeBytes > 0 && b < cfg.Sync.MaxRawMimeBytes {
			// A message within the size limit but larger than the budget
			// could never be downloaded, and its folder would stop there.
			c.add(accountVar(i, "MAX_DOWNLOAD_BYTES_PER_DAY"), "must be 0 (unlimited) or at least MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES (%d), the largest message whose content is stored", cfg.Sync.MaxRawMimeBytes)
		}
	}
	if databaseConfigured(c) && cfg.UI.Enabled && raw.Service.UIPassword == "" {
		c.add(Prefix+"UI_PASSWORD", "is required when a database is configured and the UI is enabled (only the embedded default generates one); set it to a secret reference such as file:/run/secrets/ui-password")
	}
}
