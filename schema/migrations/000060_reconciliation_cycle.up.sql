-- A reconciliation cycle: the backward pass walks a folder larger than its
-- window over several runs, and the modification sequence the folder
-- reported when that walk began may be recorded as highest_modseq only
-- once every live occurrence has been observed since. Until then the
-- sequence and the moment it was read are kept here, so a run that is
-- killed mid-cycle resumes the cycle instead of restarting it or recording
-- a sequence nothing has covered. Both belong to the row's uid_validity and
-- are dropped with it.
ALTER TABLE synchronization_checkpoints
    ADD COLUMN reconcile_cycle_modseq     bigint,
    ADD COLUMN reconcile_cycle_started_at timestamptz,
    ADD CONSTRAINT synchronization_checkpoints_reconcile_cycle
        CHECK ((reconcile_cycle_modseq IS NULL) = (reconcile_cycle_started_at IS NULL));
