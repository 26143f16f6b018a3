package config

import (
	"time"

	"github.com/mailfathom/mailfathom/mimex"
)

// Sync is the MailSynchronization section: whether accounts synchronize and
// the bounds every run obeys. Variables are MAILFATHOM_SYNC_<NAME>.
type Sync struct {
	// Enabled is MAILFATHOM_SYNC_ENABLED. Default false. When true at least
	// one account must be configured.
	Enabled bool
	// Interval is MAILFATHOM_SYNC_INTERVAL, the wait between an account's
	// runs, measured between runs, 10s to 24h. Default 5m.
	Interval time.Duration
	// MaxFailureBackoff is MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF, the ceiling
	// the delay between a failing account's runs grows to, 10s to 168h and
	// not shorter than Interval. Default 30m.
	MaxFailureBackoff time.Duration
	// MaxConcurrentAccounts is MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS, how
	// many accounts may run at once, 1 to 100. Default 4.
	MaxConcurrentAccounts int
	// MaxConcurrentFoldersPerAccount is
	// MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT, how many folders
	// of one account may synchronize at once, 1 to 20. Default 1.
	MaxConcurrentFoldersPerAccount int
	// ShutdownDrainTimeout is MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT, how
	// long shutdown waits for work under way, 0 to 2m. Default 10s.
	ShutdownDrainTimeout time.Duration
	// MaxMetadataBatchSize is MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE, the
	// UIDs per metadata request, 1 to 1000. Default 100.
	MaxMetadataBatchSize int
	// MaxRawMimeBytes is MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES; a larger
	// message is recorded as metadata only. 1024 to 1073741824 (1 KiB to
	// 1 GiB). Default 26214400 (25 MiB).
	MaxRawMimeBytes int64
	// MaxMetadataBatchesPerRun is MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN,
	// 1 to 1000. Default 10.
	MaxMetadataBatchesPerRun int
	// MaxReconciledEmailsPerRun is
	// MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN, the bound of one
	// backward pass, 1 to 10000. Default 500.
	MaxReconciledEmailsPerRun int
	// MaxMimePartCount is MAILFATHOM_SYNC_MAX_MIME_PART_COUNT, 1 to 100000.
	// Default 1000.
	MaxMimePartCount int
	// MaxMimeNestingDepth is MAILFATHOM_SYNC_MAX_MIME_NESTING_DEPTH, 1 to
	// 1000. Default 30.
	MaxMimeNestingDepth int
	// MaxExtractedTextCharacters is
	// MAILFATHOM_SYNC_MAX_EXTRACTED_TEXT_CHARACTERS, the indexed body text
	// bound, 1 to 200000 (what a tsvector can hold). Default 100000.
	MaxExtractedTextCharacters int
	// PushRenewalInterval is MAILFATHOM_SYNC_PUSH_RENEWAL_INTERVAL, the
	// lifetime of one IDLE command, 1m to 29m (RFC 2177). Default 20m.
	PushRenewalInterval time.Duration
	// MaxConsecutivePushFailures is
	// MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES, failures before a
	// folder degrades to polling, 1 to 100. Default 3.
	MaxConsecutivePushFailures int
	// PushDegradationPeriod is MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD, how
	// long a degraded folder stays on polling, 10s to 24h. Default 15m.
	PushDegradationPeriod time.Duration
	// MaxSubscribedFolders is MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS, the
	// folders one NOTIFY subscription may name, 1 to 100. Default 20.
	MaxSubscribedFolders int
	// WriteConnectionIdlePeriod is
	// MAILFATHOM_SYNC_WRITE_CONNECTION_IDLE_PERIOD, how long the write
	// connection is kept after its last change, 1s to 1h. Default 2m.
	WriteConnectionIdlePeriod time.Duration
	// MaxMutationsPerConvergencePass is
	// MAILFATHOM_SYNC_MAX_MUTATIONS_PER_CONVERGENCE_PASS, unfinished changes
	// one run takes on, 1 to 1000. Default 50.
	MaxMutationsPerConvergencePass int
	// UnknownMutationOutcomeGrace is
	// MAILFATHOM_SYNC_UNKNOWN_MUTATION_OUTCOME_GRACE, how long an
	// unacknowledged placement waits to be settled, 1m to 720h (30 days).
	// Default 6h.
	UnknownMutationOutcomeGrace time.Duration
	// MaxMutationAttempts is MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS, the
	// attempts one change may spend across runs, 1 to 100. Default 5.
	MaxMutationAttempts int
}

type rawSync struct {
	Enabled                        string `env:"ENABLED" envDefault:"false"`
	Interval                       string `env:"INTERVAL" envDefault:"5m"`
	MaxFailureBackoff              string `env:"MAX_FAILURE_BACKOFF" envDefault:"30m"`
	MaxConcurrentAccounts          string `env:"MAX_CONCURRENT_ACCOUNTS" envDefault:"4"`
	MaxConcurrentFoldersPerAccount string `env:"MAX_CONCURRENT_FOLDERS_PER_ACCOUNT" envDefault:"1"`
	ShutdownDrainTimeout           string `env:"SHUTDOWN_DRAIN_TIMEOUT" envDefault:"10s"`
	MaxMetadataBatchSize           string `env:"MAX_METADATA_BATCH_SIZE" envDefault:"100"`
	MaxRawMimeBytes                string `env:"MAX_RAW_MIME_BYTES" envDefault:"26214400"`
	MaxMetadataBatchesPerRun       string `env:"MAX_METADATA_BATCHES_PER_RUN" envDefault:"10"`
	MaxReconciledEmailsPerRun      string `env:"MAX_RECONCILED_EMAILS_PER_RUN" envDefault:"500"`
	MaxMimePartCount               string `env:"MAX_MIME_PART_COUNT" envDefault:"1000"`
	MaxMimeNestingDepth            string `env:"MAX_MIME_NESTING_DEPTH" envDefault:"30"`
	MaxExtractedTextCharacters     string `env:"MAX_EXTRACTED_TEXT_CHARACTERS" envDefault:"100000"`
	PushRenewalInterval            string `env:"PUSH_RENEWAL_INTERVAL" envDefault:"20m"`
	MaxConsecutivePushFailures     string `env:"MAX_CONSECUTIVE_PUSH_FAILURES" envDefault:"3"`
	PushDegradationPeriod          string `env:"PUSH_DEGRADATION_PERIOD" envDefault:"15m"`
	MaxSubscribedFolders           string `env:"MAX_SUBSCRIBED_FOLDERS" envDefault:"20"`
	WriteConnectionIdlePeriod      string `env:"WRITE_CONNECTION_IDLE_PERIOD" envDefault:"2m"`
	MaxMutationsPerConvergencePass string `env:"MAX_MUTATIONS_PER_CONVERGENCE_PASS" envDefault:"50"`
	UnknownMutationOutcomeGrace    string `env:"UNKNOWN_MUTATION_OUTCOME_GRACE" envDefault:"6h"`
	MaxMutationAttempts            string `env:"MAX_MUTATION_ATTEMPTS" envDefault:"5"`
}

func convertSync(c *converter, raw rawSync) Sync {
	const p = Prefix + "SYNC_"
	const day = 24 * time.Hour
	s := Sync{
		Enabled:                        c.boolean(p+"ENABLED", raw.Enabled),
		Interval:                       c.duration(p+"INTERVAL", raw.Interval, 10*time.Second, day),
		MaxFailureBackoff:              c.duration(p+"MAX_FAILURE_BACKOFF", raw.MaxFailureBackoff, 10*time.Second, 7*day),
		MaxConcurrentAccounts:          c.integer(p+"MAX_CONCURRENT_ACCOUNTS", raw.MaxConcurrentAccounts, 1, 100),
		MaxConcurrentFoldersPerAccount: c.integer(p+"MAX_CONCURRENT_FOLDERS_PER_ACCOUNT", raw.MaxConcurrentFoldersPerAccount, 1, 20),
		ShutdownDrainTimeout:           c.duration(p+"SHUTDOWN_DRAIN_TIMEOUT", raw.ShutdownDrainTimeout, 0, 2*time.Minute),
		MaxMetadataBatchSize:           c.integer(p+"MAX_METADATA_BATCH_SIZE", raw.MaxMetadataBatchSize, 1, 1000),
		MaxRawMimeBytes:                c.integer64(p+"MAX_RAW_MIME_BYTES", raw.MaxRawMimeBytes, 1<<10, 1<<30),
		MaxMetadataBatchesPerRun:       c.integer(p+"MAX_METADATA_BATCHES_PER_RUN", raw.MaxMetadataBatchesPerRun, 1, 1000),
		MaxReconciledEmailsPerRun:      c.integer(p+"MAX_RECONCILED_EMAILS_PER_RUN", raw.MaxReconciledEmailsPerRun, 1, 10000),
		MaxMimePartCount:               c.integer(p+"MAX_MIME_PART_COUNT", raw.MaxMimePartCount, 1, 100000),
		MaxMimeNestingDepth:            c.integer(p+"MAX_MIME_NESTING_DEPTH", raw.MaxMimeNestingDepth, 1, 1000),
		MaxExtractedTextCharacters:     c.integer(p+"MAX_EXTRACTED_TEXT_CHARACTERS", raw.MaxExtractedTextCharacters, 1, 200000),
		PushRenewalInterval:            c.duration(p+"PUSH_RENEWAL_INTERVAL", raw.PushRenewalInterval, time.Minute, 29*time.Minute),
		MaxConsecutivePushFailures:     c.integer(p+"MAX_CONSECUTIVE_PUSH_FAILURES", raw.MaxConsecutivePushFailures, 1, 100),
		PushDegradationPeriod:          c.duration(p+"PUSH_DEGRADATION_PERIOD", raw.PushDegradationPeriod, 10*time.Second, day),
		MaxSubscribedFolders:           c.integer(p+"MAX_SUBSCRIBED_FOLDERS", raw.MaxSubscribedFolders, 1, 100),
		WriteConnectionIdlePeriod:      c.duration(p+"WRITE_CONNECTION_IDLE_PERIOD", raw.WriteConnectionIdlePeriod, time.Second, time.Hour),
		MaxMutationsPerConvergencePass: c.integer(p+"MAX_MUTATIONS_PER_CONVERGENCE_PASS", raw.MaxMutationsPerConvergencePass, 1, 1000),
		UnknownMutationOutcomeGrace:    c.duration(p+"UNKNOWN_MUTATION_OUTCOME_GRACE", raw.UnknownMutationOutcomeGrace, time.Minute, 30*day),
		MaxMutationAttempts:            c.integer(p+"MAX_MUTATION_ATTEMPTS", raw.MaxMutationAttempts, 1, 100),
	}
	if s.Interval > 0 && s.MaxFailureBackoff > 0 && s.MaxFailureBackoff < s.Interval {
		c.add(p+"MAX_FAILURE_BACKOFF", "(%s) must not be shorter than MAILFATHOM_SYNC_INTERVAL (%s): a shorter ceiling would run a failing account more often than a healthy one; set them equal for no backoff",
			formatDuration(s.MaxFailureBackoff), formatDuration(s.Interval))
	}
	return s
}

// MimeLimits returns the bounds the MIME reader applies to every stored
// message: part count, nesting depth and indexed text.
func (s Sync) MimeLimits() mimex.Limits {
	return mimex.Limits{
		MaxPartCount:               s.MaxMimePartCount,
		MaxNestingDepth:            s.MaxMimeNestingDepth,
		MaxExtractedTextCharacters: s.MaxExtractedTextCharacters,
	}
}
