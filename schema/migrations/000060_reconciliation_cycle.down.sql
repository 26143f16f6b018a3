ALTER TABLE synchronization_checkpoints
    DROP CONSTRAINT synchronization_checkpoints_reconcile_cycle,
    DROP COLUMN reconcile_cycle_started_at,
    DROP COLUMN reconcile_cycle_modseq;
