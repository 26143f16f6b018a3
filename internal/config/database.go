package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// Database configures the PostgreSQL server MailFathom keeps its copy in.
// Either URL or the parts (Host, Port, Name, User, SSLMode) describe an
// external server, never both; with neither, the service starts the embedded
// default under EmbeddedDataDir. The password is never part of either form:
// it comes from the Password secret reference.
type Database struct {
	// URL is MAILFATHOM_DATABASE_URL, a postgres:// or postgresql:// URL
	// that carries no password. Empty by default.
	URL string
	// Host is MAILFATHOM_DATABASE_HOST, required when the parts are used.
	// Empty by default.
	Host string
	// Port is MAILFATHOM_DATABASE_PORT, 1 to 65535. Default 5432; used only
	// with the parts.
	Port int
	// Name is MAILFATHOM_DATABASE_NAME, the database name. Empty by default
	// (the server's default, the user name).
	Name string
	// User is MAILFATHOM_DATABASE_USER. Empty by default (the server's
	// default).
	User string
	// SSLMode is MAILFATHOM_DATABASE_SSLMODE, one of disable, allow, prefer,
	// require, verify-ca and verify-full. Empty by default (the driver's
	// default, prefer).
	SSLMode string
	// Password is MAILFATHOM_DATABASE_PASSWORD, a secret reference. Zero by
	// default (no password, e.g. peer or certificate authentication).
	Password secret.Reference
	// MaxConnections is MAILFATHOM_DATABASE_MAX_CONNECTIONS, the pool size,
	// 2 to 200. Default 10.
	MaxConnections int
	// EmbeddedDataDir is MAILFATHOM_EMBEDDED_DATA_DIR, the embedded
	// cluster's data directory. Default .mailfathom/postgres; empty when an
	// external database is configured.
	EmbeddedDataDir string
}

// Embedded reports whether no external database is configured, so the
// service starts the embedded default.
func (d Database) Embedded() bool { return d.URL == "" && d.Host == "" }

// ConnString returns a password-free PostgreSQL URL for the external
// database: URL as configured, or one built from the parts. It returns ""
// for the embedded default. The caller supplies the password resolved from
// Password.
func (d Database) ConnString() string {
	if d.URL != "" {
		return d.URL
	}
	if d.Host == "" {
		return ""
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(d.Host, strconv.Itoa(d.Port))}
	if d.User != "" {
		u.User = url.User(d.User)
	}
	if d.Name != "" {
		u.Path = "/" + d.Name
	}
	if d.SSLMode != "" {
		u.RawQuery = url.Values{"sslmode": {d.SSLMode}}.Encode()
	}
	return u.String()
}

// SSLModes lists the accepted MAILFATHOM_DATABASE_SSLMODE values.
var SSLModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

type rawDatabase struct {
	URL             string `env:"DATABASE_URL"`
	Host            string `env:"DATABASE_HOST"`
	Port            string `env:"DATABASE_PORT" envDefault:"5432"`
	Name            string `env:"DATABASE_NAME"`
	User            string `env:"DATABASE_USER"`
	SSLMode         string `env:"DATABASE_SSLMODE"`
	Password        string `env:"DATABASE_PASSWORD"`
	MaxConnections  string `env:"DATABASE_MAX_CONNECTIONS" envDefault:"10"`
	EmbeddedDataDir string `env:"EMBEDDED_DATA_DIR" envDefault:".mailfathom/postgres"`
}

var databaseParts = []string{"DATABASE_HOST", "DATABASE_PORT", "DATABASE_NAME", "DATABASE_USER", "DATABASE_SSLMODE"}

// databaseConfigured reports whether the operator configured an external
// database in either form, valid or not.
func databaseConfigured(c *converter) bool {
	if c.isSet(Prefix + "DATABASE_URL") {
		return true
	}
	for _, p := range databaseParts {
		if c.isSet(Prefix + p) {
			return true
		}
	}
	return false
}

func convertDatabase(c *converter, raw rawDatabase) Database {
	var d Database
	d.MaxConnections = c.integer(Prefix+"DATABASE_MAX_CONNECTIONS", raw.MaxConnections, 2, 200)
	d.Password = c.reference(Prefix+"DATABASE_PASSWORD", raw.Password)

	var partsSet []string
	for _, p := range databaseParts {
		if c.isSet(Prefix + p) {
			partsSet = append(partsSet, Prefix+p)
		}
	}
	configured := databaseConfigured(c)

	switch {
	case raw.URL != "":
		for _, p := range partsSet {
			c.add(p, "contradicts MAILFATHOM_DATABASE_URL: configure the database either as a URL or by its parts, not both")
		}
		d.URL = convertDatabaseURL(c, raw.URL)
	case configured:
		d.Host = raw.Host
		if d.Host == "" {
			c.add(Prefix+"DATABASE_HOST", "is required when the database is configured by its parts (%s)", strings.Join(partsSet, ", "))
		}
		d.Port = c.integer(Prefix+"DATABASE_PORT", raw.Port, 1, 65535)
		d.Name = raw.Name
		d.User = raw.User
		if raw.SSLMode != "" {
			if m, ok := enum(c, Prefix+"DATABASE_SSLMODE", raw.SSLMode, SSLModes); ok {
				d.SSLMode = m
			}
		}
	}

	if configured {
		if c.isSet(Prefix + "EMBEDDED_DATA_DIR") {
			c.add(Prefix+"EMBEDDED_DATA_DIR", "contradicts the configured database: the embedded data directory is used only when neither MAILFATHOM_DATABASE_URL nor MAILFATHOM_DATABASE_HOST is set")
		}
	} else {
		d.EmbeddedDataDir = raw.EmbeddedDataDir
		if raw.Password != "" {
			c.add(Prefix+"DATABASE_PASSWORD", "is set but no database is configured; set MAILFATHOM_DATABASE_URL or MAILFATHOM_DATABASE_HOST, or remove it to use the embedded default")
		}
	}
	return d
}

// convertDatabaseURL validates a database URL without ever echoing it: the
// net/url errors quote their input, so none is passed on.
func convertDatabaseURL(c *converter, raw string) string {
	const variable = Prefix + "DATABASE_URL"
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
		c.add(variable, "must be a URL of the form postgres://user@host:5432/database?sslmode=require, without a password (put the password in MAILFATHOM_DATABASE_PASSWORD)")
		return ""
	}
	_, hasPassword := u.User.Password()
	for _, kv := range strings.Split(u.RawQuery, "&") {
		key, _, _ := strings.Cut(kv, "=")
		if unescaped, uerr := url.QueryUnescape(key); uerr == nil {
			key = unescaped
		}
		if strings.EqualFold(strings.TrimSpace(key), "password") {
			hasPassword = true
		}
	}
	if hasPassword {
		c.add(variable, "carries a password; remove it from the URL and set MAILFATHOM_DATABASE_PASSWORD to a secret reference such as file:/run/secrets/postgres-password")
		return ""
	}
	return raw
}
