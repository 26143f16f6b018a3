package config

import (
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// HTTP configures the one HTTP listener.
type HTTP struct {
	// Addr is MAILFATHOM_HTTP_ADDR, a host:port with a numeric port from 0
	// to 65535 (0 picks a free port). Default 127.0.0.1:8080; the container
	// sets 0.0.0.0:8080.
	Addr string
}

// UI configures River UI and its basic authentication.
type UI struct {
	// Enabled is MAILFATHOM_UI_ENABLED. Default true.
	Enabled bool
	// Username is MAILFATHOM_UI_USERNAME, the basic-auth user name; it must
	// not be blank or contain a colon. Default admin.
	Username string
	// Password is MAILFATHOM_UI_PASSWORD, a secret reference. Required when
	// an external database is configured and the UI is enabled; zero with
	// the embedded default, in which case the service generates one.
	Password secret.Reference
}

// LogFormat is the process log's encoding.
type LogFormat string

// The log formats.
const (
	LogFormatJSON LogFormat = "json"
	LogFormatText LogFormat = "text"
)

// LogFormats lists the accepted MAILFATHOM_LOG_FORMAT values.
var LogFormats = []LogFormat{LogFormatJSON, LogFormatText}

// LogLevel is the minimum level logged.
type LogLevel string

// The log levels.
const (
	LogLevelDebug LogLevel = "debug"
	LogLevelInfo  LogLevel = "info"
	LogLevelWarn  LogLevel = "warn"
	LogLevelError LogLevel = "error"
)

// LogLevels lists the accepted MAILFATHOM_LOG_LEVEL values.
var LogLevels = []LogLevel{LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError}

// Slog returns the log/slog level l names; an unknown level is info.
func (l LogLevel) Slog() slog.Level {
	switch l {
	case LogLevelDebug:
		return slog.LevelDebug
	case LogLevelWarn:
		return slog.LevelWarn
	case LogLevelError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Log configures the process log.
type Log struct {
	// Format is MAILFATHOM_LOG_FORMAT, json or text. Default json.
	Format LogFormat
	// Level is MAILFATHOM_LOG_LEVEL, debug, info, warn or error. Default
	// info.
	Level LogLevel
}

// Queues holds the River worker count per queue, each 0 to 1000, where 0
// means derived from the synchronization bounds.
type Queues struct {
	// Accounts is MAILFATHOM_QUEUE_ACCOUNTS_WORKERS. Default 0: derived as
	// Sync.MaxConcurrentAccounts.
	Accounts int
	// Folders is MAILFATHOM_QUEUE_FOLDERS_WORKERS. Default 0: derived as
	// Sync.MaxConcurrentAccounts × Sync.MaxConcurrentFoldersPerAccount.
	Folders int
	// Backfill is MAILFATHOM_QUEUE_BACKFILL_WORKERS. Default 1; 0 also
	// means 1.
	Backfill int
	// Mutations is MAILFATHOM_QUEUE_MUTATIONS_WORKERS, the workers carrying
	// mailbox mutation stages. Default 1; 0 also means 1.
	Mutations int
	// Watches is MAILFATHOM_QUEUE_WATCHES_WORKERS. Default 0: derived as
	// the number of accounts whose mode is Push, at least 1. A watch holds
	// its worker for its whole life, so a process that should be able to
	// take over every account's watch needs one per push account.
	Watches int
	// Embeddings is MAILFATHOM_QUEUE_EMBEDDINGS_WORKERS, embed jobs run at
	// once, 1 to 1000. Default 2. Only with an embedding profile: the
	// provider's ConcurrencyLimit (AiProviderInvocation) bounds the calls
	// in flight whatever the count.
	Embeddings int
}

// EffectiveQueueWorkers returns the worker count each queue runs with: the
// configured count, or the derived one where 0 is configured. Every count it
// returns is at least 1.
func (c *Config) EffectiveQueueWorkers() Queues {
	q := c.Queues
	accounts := max(c.Sync.MaxConcurrentAccounts, 1)
	folders := accounts * max(c.Sync.MaxConcurrentFoldersPerAccount, 1)
	if q.Accounts == 0 {
		q.Accounts = accounts
	}
	if q.Folders == 0 {
		q.Folders = folders
	}
	if q.Backfill == 0 {
		q.Backfill = 1
	}
	if q.Mutations == 0 {
		q.Mutations = 1
	}
	if q.Watches == 0 {
		for _, a := range c.Accounts {
			if a.Mode == ModePush {
				q.Watches++
			}
		}
		q.Watches = max(q.Watches, 1)
	}
	if q.Embeddings == 0 {
		q.Embeddings = 2
	}
	return q
}

type rawService struct {
	HTTPAddr          string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	InterpretMode     string `env:"SECRET_INTERPRETATION_MODE" envDefault:"ReferenceOnly"`
	UIEnabled         string `env:"UI_ENABLED" envDefault:"true"`
	UIUsername        string `env:"UI_USERNAME" envDefault:"admin"`
	UIPassword        string `env:"UI_PASSWORD"`
	MigrateOnStart    string `env:"MIGRATE_ON_START" envDefault:"true"`
	LogFormat         string `env:"LOG_FORMAT" envDefault:"json"`
	LogLevel          string `env:"LOG_LEVEL" envDefault:"info"`
	AccountsWorkers   string `env:"QUEUE_ACCOUNTS_WORKERS" envDefault:"0"`
	FoldersWorkers    string `env:"QUEUE_FOLDERS_WORKERS" envDefault:"0"`
	BackfillWorkers   string `env:"QUEUE_BACKFILL_WORKERS" envDefault:"1"`
	MutationsWorkers  string `env:"QUEUE_MUTATIONS_WORKERS" envDefault:"1"`
	WatchesWorkers    string `env:"QUEUE_WATCHES_WORKERS" envDefault:"0"`
	EmbeddingsWorkers string `env:"QUEUE_EMBEDDINGS_WORKERS" envDefault:"2"`
}

func convertService(c *converter, raw rawService, cfg *Config) {
	if mode, ok := enum(c, Prefix+"SECRET_INTERPRETATION_MODE", raw.InterpretMode, InterpretationModes); ok {
		cfg.SecretInterpretationMode = mode
	} else {
		cfg.SecretInterpretationMode = ReferenceOnly
	}
	c.interpretation = cfg.SecretInterpretationMode

	cfg.HTTP.Addr = raw.HTTPAddr
	if host, port, err := net.SplitHostPort(raw.HTTPAddr); err != nil || strings.ContainsAny(host, " \t") {
		c.add(Prefix+"HTTP_ADDR", "must be host:port, such as 127.0.0.1:8080 or 0.0.0.0:8080")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.add(Prefix+"HTTP_ADDR", "must end in a numeric port from 0 to 65535")
	}

	cfg.UI.Enabled = c.boolean(Prefix+"UI_ENABLED", raw.UIEnabled)
	cfg.UI.Username = raw.UIUsername
	if strings.ContainsRune(raw.UIUsername, ':') || hasControl(raw.UIUsername) {
		c.add(Prefix+"UI_USERNAME", "must not contain a colon or a control character (basic authentication cannot carry them)")
	}
	cfg.UI.Password = c.reference(Prefix+"UI_PASSWORD", raw.UIPassword)
	cfg.MigrateOnStart = c.boolean(Prefix+"MIGRATE_ON_START", raw.MigrateOnStart)

	if f, ok := enum(c, Prefix+"LOG_FORMAT", raw.LogFormat, LogFormats); ok {
		cfg.Log.Format = f
	}
	if l, ok := enum(c, Prefix+"LOG_LEVEL", raw.LogLevel, LogLevels); ok {
		cfg.Log.Level = l
	}

	const maxWorkers = 1000
	cfg.Queues.Accounts = c.integer(Prefix+"QUEUE_ACCOUNTS_WORKERS", raw.AccountsWorkers, 0, maxWorkers)
	cfg.Queues.Folders = c.integer(Prefix+"QUEUE_FOLDERS_WORKERS", raw.FoldersWorkers, 0, maxWorkers)
	cfg.Queues.Backfill = c.integer(Prefix+"QUEUE_BACKFILL_WORKERS", raw.BackfillWorkers, 0, maxWorkers)
	cfg.Queues.Mutations = c.integer(Prefix+"QUEUE_MUTATIONS_WORKERS", raw.MutationsWorkers, 0, maxWorkers)
	cfg.Queues.Watches = c.integer(Prefix+"QUEUE_WATCHES_WORKERS", raw.WatchesWorkers, 0, maxWorkers)
	cfg.Queues.Embeddings = c.integer(Prefix+"QUEUE_EMBEDDINGS_WORKERS", raw.EmbeddingsWorkers, 1, maxWorkers)
}
