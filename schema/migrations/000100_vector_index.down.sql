DROP FUNCTION mailfathom_vector_uncoded(smallint);
DROP FUNCTION mailfathom_vector_codes(smallint, integer[], integer, bigint[], timestamptz, timestamptz);
DROP TRIGGER stored_emails_passage_signatures_follow ON stored_emails;
DROP FUNCTION mailfathom_passage_signatures_follow();
CREATE INDEX ix_passage_vectors_profile ON passage_vectors (profile_id);
DROP INDEX ix_passage_signatures_lists;
DELETE FROM passage_vectors v USING passage_signatures s
WHERE s.signature IS NULL AND v.stored_email_id = s.stored_email_id AND v.ordinal = s.ordinal AND v.profile_id = s.profile_id;
ALTER TABLE passage_signatures ALTER COLUMN signature SET NOT NULL;
ALTER TABLE passage_signatures
    DROP COLUMN list_id, DROP COLUMN code, DROP COLUMN mail_folder_id, DROP COLUMN sent_at;
DROP TABLE vector_index_lists;
DROP TABLE vector_index_generations;
DROP TABLE vector_indexes;
