-- Why a tombstone was recorded, when it was MailFathom's own change that
-- took the message out of its folder: 'RelocatedByMailFathom' for the
-- source of a relocation the server carried without naming the placement
-- (no COPYUID), which no discovery can carry across, so the destination's
-- copy is the one served; 'DeletedByMailFathom' for a delete MailFathom
-- issued. NULL for every other tombstone: the message left the folder and
-- no record of MailFathom's accounts for it.
ALTER TABLE stored_emails
    ADD COLUMN remote_expunge_reason text,
    ADD CONSTRAINT stored_emails_remote_expunge_reason_known
        CHECK (remote_expunge_reason IS NULL
            OR (remote_expunge_reason IN ('RelocatedByMailFathom', 'DeletedByMailFathom')
                AND remote_expunge_observed_at IS NOT NULL));

-- The completed relocations and copies whose placement the server never
-- named: what the status view counts per account as "completed, unjoined"
-- at every read. Completed changes grow without bound; these are few.
CREATE INDEX ix_mailbox_mutations_unjoined
    ON mailbox_mutations (mailbox_account_id, source_mail_folder_id)
    WHERE state = 'Completed' AND placed_uid IS NULL AND mutation IN ('Relocate', 'Copy');
