-- The UID space a binding serves. A folder recreated on the server (or
-- moved to another server) answers under a new UIDVALIDITY, and its mail
-- is stored again under it; until the new UID space has been walked to its
-- end the old one is what is served, and from then on only the new one.
-- Rows of the other UID space are kept, never deleted, whatever the
-- account's disposition. NULL until the binding's first checkpoint: a
-- binding with one UID space serves it.
ALTER TABLE mail_folders ADD COLUMN served_uid_validity bigint;

UPDATE mail_folders f SET served_uid_validity = c.uid_validity
FROM synchronization_checkpoints c WHERE c.mail_folder_id = f.id;

-- served_stored_emails is the stored mail every query serves: not
-- tombstoned, and of the UID space its binding serves. Every search, every
-- timeline and every content read goes through it, so a tombstone and an
-- abandoned UID space are excluded the same way everywhere.
CREATE VIEW served_stored_emails AS
SELECT e.*
FROM stored_emails e
JOIN mail_folders f ON f.id = e.mail_folder_id
WHERE e.remote_expunge_observed_at IS NULL
  AND (f.served_uid_validity IS NULL OR e.uid_validity = f.served_uid_validity);
