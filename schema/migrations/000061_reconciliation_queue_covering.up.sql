-- The reconciliation window reads the id and UID of each row it takes.
-- Carrying the id in both queue indexes lets the two window queries be
-- answered from the index alone (an index-only scan), so a window over a
-- folder of any size reads its limit's worth of index entries and no heap
-- page whose rows are all visible.
DROP INDEX ix_stored_emails_reconciliation_queue;
CREATE INDEX ix_stored_emails_reconciliation_queue
    ON stored_emails (mail_folder_id, uid_validity, remote_flags_observed_at, uid) INCLUDE (id)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NOT NULL;

DROP INDEX ix_stored_emails_never_observed;
CREATE INDEX ix_stored_emails_never_observed
    ON stored_emails (mail_folder_id, uid_validity, uid) INCLUDE (id)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NULL;
