-- vector_backlog is the set of messages with a passage that has no vector
-- under a profile: what the embedding pipeline still owes. It is kept as
-- passages and vectors are written — a passage written adds its message
-- for every profile, a message whose passages all have vectors leaves —
-- so counting what awaits reads this set, never every passage. A message
-- that stopped being served keeps its row and is not counted; the
-- embedding backfill's walk, which still finds what awaits by the passages
-- themselves, adds any message it finds missing here.
CREATE TABLE vector_backlog (
    profile_id      smallint    NOT NULL REFERENCES embedding_profiles (id) ON DELETE CASCADE,
    stored_email_id uuid        NOT NULL REFERENCES stored_emails (id) ON DELETE CASCADE,
    -- changed_at is when a passage was last written; writing it is also
    -- what makes a writer wait for a concurrent settling of the row.
    changed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (profile_id, stored_email_id)
);
CREATE INDEX ix_vector_backlog_email ON vector_backlog (stored_email_id);

INSERT INTO vector_backlog (profile_id, stored_email_id)
SELECT DISTINCT pr.id, p.stored_email_id
FROM embedding_profiles pr CROSS JOIN email_passages p
WHERE NOT EXISTS (SELECT 1 FROM passage_vectors v
                  WHERE v.stored_email_id = p.stored_email_id AND v.ordinal = p.ordinal AND v.profile_id = pr.id);
