-- A message the server lists but whose content it keeps withholding (its
-- FETCH answer leaves it out, or answers BODY[] with NIL) is recorded,
-- once it has withheld it for a bounded number of passes, like one over
-- the size limit: its metadata with content_availability ContentWithheld,
-- so the gap stays queryable instead of stopping the folder.
ALTER TABLE stored_emails DROP CONSTRAINT stored_emails_content_availability_known;
ALTER TABLE stored_emails ADD CONSTRAINT stored_emails_content_availability_known
    CHECK (content_availability IN ('Available', 'ExceededSizeLimit', 'ContentWithheld', 'NotFetched'));

-- withheld_contents counts, per occurrence, the passes its content was
-- withheld in. A row lives until the content arrives or the occurrence is
-- recorded as ContentWithheld; it holds no mail.
CREATE TABLE withheld_contents (
    mail_folder_id bigint      NOT NULL REFERENCES mail_folders (id) ON DELETE CASCADE,
    uid_validity   bigint      NOT NULL,
    uid            bigint      NOT NULL,
    passes         integer     NOT NULL DEFAULT 1,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mail_folder_id, uid_validity, uid)
);
