DROP INDEX ix_stored_emails_reconciliation_queue;
CREATE INDEX ix_stored_emails_reconciliation_queue
    ON stored_emails (mail_folder_id, uid_validity, remote_flags_observed_at, uid)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NOT NULL;

DROP INDEX ix_stored_emails_never_observed;
CREATE INDEX ix_stored_emails_never_observed
    ON stored_emails (mail_folder_id, uid_validity, uid)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NULL;
