// Package database opens MailFathom's PostgreSQL connection pool.
//
// The password never sits in the connection string: it is resolved from its
// secret reference each time the pool opens a physical connection, so a
// rotated password reaches the next connection without a restart and no
// long-lived copy of it exists in the pool's configuration.
package database

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PasswordFunc resolves the database password for one physical connection.
// It returns nil when no password is configured.
type PasswordFunc func(ctx context.Context) ([]byte, error)

// Options configure Open.
type Options struct {
	// ConnString is a PostgreSQL URL or keyword/value string without a
	// password. Required.
	ConnString string
	// Password, when set, supplies the password for each new connection.
	Password PasswordFunc
	// MaxConns bounds the pool. Default: 10.
	MaxConns int32
	// ApplicationName is reported to PostgreSQL (pg_stat_activity).
	// Default: "mailfathom".
	ApplicationName string
	// ConnectTimeout bounds one connection attempt. Default: 10s.
	ConnectTimeout time.Duration
}

// Open parses the options and returns a pool; it does not wait for a
// connection (call Ping for that). Errors never contain the password.
func Open(ctx context.Context, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(opts.ConnString)
	if err != nil {
		// pgx's parse error can echo the string; the string carries no
		// password by contract, but say only what failed.
		return nil, fmt.Errorf("database: the connection string does not parse")
	}
	cfg.MaxConns = cmp.Or(opts.MaxConns, 10)
	cfg.ConnConfig.ConnectTimeout = cmp.Or(opts.ConnectTimeout, 10*time.Second)
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = cmp.Or(opts.ApplicationName, "mailfathom")
	if opts.Password != nil {
		resolve := opts.Password
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			pw, err := resolve(ctx)
			if err != nil {
				return fmt.Errorf("database: resolve password: %w", err)
			}
			cc.Password = string(pw)
			clear(pw)
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: open pool: %w", err)
	}
	return pool, nil
}
