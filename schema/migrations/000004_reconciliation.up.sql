-- The reconciliation queue: a folder's stored mail that is still on the
-- server, oldest flag observation first. The backward pass reads its window
-- from the front of it with an index scan and no sort; writing an
-- observation moves a row to the back. uid_validity sits after the folder
-- so rows of an abandoned UID space are never scanned past: a UIDVALIDITY
-- change within one binding would otherwise leave its old rows at the front
-- of every scan.
CREATE INDEX ix_stored_emails_reconciliation_queue
    ON stored_emails (mail_folder_id, uid_validity, remote_flags_observed_at, uid)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NOT NULL;

-- The never-observed half of the window is read in UID order; this partial
-- index serves it without visiting observed or tombstoned rows.
CREATE INDEX ix_stored_emails_never_observed
    ON stored_emails (mail_folder_id, uid_validity, uid)
    WHERE remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NULL;
