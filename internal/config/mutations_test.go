package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMutationSettings: the mailbox mutation settings are read and reach
// the configuration they govern.
func TestMutationSettings(t *testing.T) {
	t.Parallel()
	cfg, err := testLoader.Load([]string{
		"MAILFATHOM_SYNC_WRITE_CONNECTION_IDLE_PERIOD=30s",
		"MAILFATHOM_SYNC_MAX_MUTATIONS_PER_CONVERGENCE_PASS=7",
		"MAILFATHOM_SYNC_UNKNOWN_MUTATION_OUTCOME_GRACE=90m",
		"MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS=3",
		"MAILFATHOM_QUEUE_MUTATIONS_WORKERS=4",
	})
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, cfg.Sync.WriteConnectionIdlePeriod)
	require.Equal(t, 7, cfg.Sync.MaxMutationsPerConvergencePass)
	require.Equal(t, 90*time.Minute, cfg.Sync.UnknownMutationOutcomeGrace)
	require.Equal(t, 3, cfg.Sync.MaxMutationAttempts)
	require.Equal(t, 4, cfg.EffectiveQueueWorkers().Mutations)
}
