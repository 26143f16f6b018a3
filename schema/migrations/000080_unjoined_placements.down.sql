DROP INDEX IF EXISTS ix_mailbox_mutations_unjoined;
ALTER TABLE stored_emails DROP COLUMN IF EXISTS remote_expunge_reason;
