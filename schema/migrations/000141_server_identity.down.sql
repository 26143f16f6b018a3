DROP VIEW served_stored_emails;
DROP INDEX ix_stored_emails_server_thread;
DROP INDEX ix_stored_emails_shared;
DROP INDEX ux_stored_emails_server_identity;
-- Occurrences that shared a holder become emails of their own again,
-- without content, as they were stored before identities were kept.
ALTER TABLE stored_emails
    DROP COLUMN shared_email_id,
    DROP COLUMN remote_labels,
    DROP COLUMN server_thread_id,
    DROP COLUMN server_email_id;
CREATE VIEW served_stored_emails AS
SELECT e.*
FROM stored_emails e
JOIN mail_folders f ON f.id = e.mail_folder_id
WHERE e.remote_expunge_observed_at IS NULL
  AND (f.served_uid_validity IS NULL OR e.uid_validity = f.served_uid_validity);
