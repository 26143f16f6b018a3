-- The mutations that are not completed, per account and source folder:
-- what the status view and the mutation metrics count at every scrape.
-- Completed changes are kept and grow without bound, so the counts read
-- this index rather than the table; its predicate is the one they filter
-- on, and dead-lettered changes (which ix_mailbox_mutations_unfinished
-- leaves out) are in it.
CREATE INDEX ix_mailbox_mutations_outstanding
    ON mailbox_mutations (mailbox_account_id, source_mail_folder_id, state)
    WHERE state <> 'Completed';
