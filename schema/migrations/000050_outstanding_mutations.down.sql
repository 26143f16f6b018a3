DROP INDEX IF EXISTS ix_mailbox_mutations_outstanding;
