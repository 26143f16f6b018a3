-- passage_refusals records the passages the embedding provider refused for
-- good under a profile: it answered 400, 413 or 422 to a request of the
-- passage alone. status is that answer's status; nothing of the passage's
-- text is kept. A refused passage is not awaiting a vector — it is neither
-- offered for embedding again nor counted as awaiting — until its text
-- changes: a changed passage is deleted and written again, and its refusal
-- goes with it, as it goes with its profile.
CREATE TABLE passage_refusals (
    stored_email_id uuid        NOT NULL,
    ordinal         smallint    NOT NULL,
    profile_id      smallint    NOT NULL REFERENCES embedding_profiles (id) ON DELETE CASCADE,
    status          smallint    NOT NULL CHECK (status BETWEEN 400 AND 499),
    refused_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stored_email_id, ordinal, profile_id),
    FOREIGN KEY (stored_email_id, ordinal) REFERENCES email_passages (stored_email_id, ordinal) ON DELETE CASCADE
);
CREATE INDEX ix_passage_refusals_profile ON passage_refusals (profile_id);
