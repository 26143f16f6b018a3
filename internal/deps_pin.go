package deps

import (
	_ "github.com/caarlos0/env/v11"
	_ "github.com/emersion/go-imap/v2/imapclient"
	_ "github.com/emersion/go-message"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	_ "github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riverpgxv5"
	_ "github.com/riverqueue/river/rivermigrate"
	_ "github.com/stretchr/testify/require"
	_ "riverqueue.com/riverui"
)
