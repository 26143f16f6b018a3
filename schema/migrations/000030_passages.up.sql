-- email_passages is a message's text cut into bounded passages, the unit
-- an embedding is computed for: ordinal 0 is the subject, ordinals from 1
-- the trimmed body text in reading order. Passages are derived on the same
-- read as the body text and written in the same transaction; they are
-- keyed by the stored email, so a relocated email keeps them and a removed
-- one loses them.
CREATE TABLE email_passages (
    stored_email_id uuid     NOT NULL REFERENCES stored_emails (id) ON DELETE CASCADE,
    ordinal         smallint NOT NULL,
    text            text COMPRESSION lz4 NOT NULL,
    PRIMARY KEY (stored_email_id, ordinal),
    CONSTRAINT email_passages_ordinal_nonnegative CHECK (ordinal >= 0)
);

-- Mail extracted before passages existed gains them from the extraction
-- backfill, which selects stored messages with content and no passages and
-- walks them from the start again.
DELETE FROM extraction_backfill_positions;
