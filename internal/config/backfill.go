package config

import "time"

// Backfill is the MailExtractionBackfill section, from
// MAILFATHOM_BACKFILL_<NAME>. The backfill extracts text from raw MIME an
// earlier run stored; it reaches no mail server, so it has its own switch
// rather than following MAILFATHOM_SYNC_ENABLED.
type Backfill struct {
	// Enabled is MAILFATHOM_BACKFILL_ENABLED. Default true.
	Enabled bool
	// Interval is MAILFATHOM_BACKFILL_INTERVAL, the wait between backfill
	// runs, 1s to 24h. Default 30s.
	Interval time.Duration
	// BatchSize is MAILFATHOM_BACKFILL_BATCH_SIZE, emails per batch, 1 to
	// 1000. Default 50.
	BatchSize int
	// MaxBatchesPerRun is MAILFATHOM_BACKFILL_MAX_BATCHES_PER_RUN, 1 to
	// 1000. Default 10.
	MaxBatchesPerRun int
}

type rawBackfill struct {
	Enabled          string `env:"ENABLED" envDefault:"true"`
	Interval         string `env:"INTERVAL" envDefault:"30s"`
	BatchSize        string `env:"BATCH_SIZE" envDefault:"50"`
	MaxBatchesPerRun string `env:"MAX_BATCHES_PER_RUN" envDefault:"10"`
}

func convertBackfill(c *converter, raw rawBackfill) Backfill {
	const p = Prefix + "BACKFILL_"
	return Backfill{
		Enabled:          c.boolean(p+"ENABLED", raw.Enabled),
		Interval:         c.duration(p+"INTERVAL", raw.Interval, time.Second, 24*time.Hour),
		BatchSize:        c.integer(p+"BATCH_SIZE", raw.BatchSize, 1, 1000),
		MaxBatchesPerRun: c.integer(p+"MAX_BATCHES_PER_RUN", raw.MaxBatchesPerRun, 1, 1000),
	}
}
