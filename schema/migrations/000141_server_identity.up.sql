-- One message, one stored email: a server that names its messages across
-- folders (Gmail's X-GM-MSGID, RFC 8474's EMAILID) says which occurrences
-- are one message. The first occurrence stored holds the email — its raw
-- MIME, extraction, search document, passages and vectors — and every
-- other occurrence of the same server identity is a row of its own (its
-- identity stays (account, binding, UIDVALIDITY, UID), so each folder is
-- reconciled as before) that names the holder in shared_email_id and holds
-- no content.
--
-- server_email_id is the identity with its scheme ('x-gm-msgid:…',
-- 'emailid:…'); server_thread_id likewise (X-GM-THRID, THREADID), NULL
-- when the server sent none. A holder of a UID space its folder has
-- replaced (the folder was recreated) gives its identity up (NULL): the
-- new space is stored as one of its own. remote_labels are Gmail's X-GM-LABELS as last
-- observed, kept on the holder (labels belong to the message, not to a
-- folder); NULL where the server has no labels.
ALTER TABLE stored_emails
    ADD COLUMN server_email_id  text,
    ADD COLUMN server_thread_id text,
    ADD COLUMN remote_labels    text[],
    ADD COLUMN shared_email_id  uuid REFERENCES stored_emails (id) ON DELETE CASCADE,
    ADD CONSTRAINT stored_emails_shared_needs_identity
        CHECK (shared_email_id IS NULL OR server_email_id IS NOT NULL),
    ADD CONSTRAINT stored_emails_not_shared_with_itself
        CHECK (shared_email_id IS DISTINCT FROM id);

-- One holder per server identity and account: a second pass that fetched
-- the same message concurrently meets this and writes its group again, as
-- an occurrence of the holder.
CREATE UNIQUE INDEX ux_stored_emails_server_identity
    ON stored_emails (mailbox_account_id, server_email_id)
    WHERE server_email_id IS NOT NULL AND shared_email_id IS NULL;

CREATE INDEX ix_stored_emails_shared
    ON stored_emails (shared_email_id) WHERE shared_email_id IS NOT NULL;

CREATE INDEX ix_stored_emails_server_thread
    ON stored_emails (mailbox_account_id, server_thread_id) WHERE server_thread_id IS NOT NULL;

-- served_stored_emails serves each email once, by its holder row, while
-- any of its occurrences lives: a message that left one folder and stays
-- in another is still served. An occurrence that shares a holder is never
-- served itself.
CREATE OR REPLACE VIEW served_stored_emails AS
SELECT e.*
FROM stored_emails e
JOIN mail_folders f ON f.id = e.mail_folder_id
WHERE e.shared_email_id IS NULL
  AND ((e.remote_expunge_observed_at IS NULL
        AND (f.served_uid_validity IS NULL OR e.uid_validity = f.served_uid_validity))
    OR EXISTS (
        SELECT 1 FROM stored_emails o JOIN mail_folders g ON g.id = o.mail_folder_id
        WHERE o.shared_email_id = e.id AND o.remote_expunge_observed_at IS NULL
          AND (g.served_uid_validity IS NULL OR o.uid_validity = g.served_uid_validity)));
