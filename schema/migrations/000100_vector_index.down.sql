DROP FUNCTION mailfathom_vector_uncoded(smallint);
DROP FUNCTION mailfathom_vector_codes(smallint, integer[], bigint[], timestamptz, timestamptz);
DROP TRIGGER stored_emails_passage_signatures_follow ON stored_emails;
DROP FUNCTION mailfathom_passage_signatures_follow();
CREATE INDEX ix_passage_vectors_profile ON passage_vectors (profile_id);
DROP INDEX ix_passage_signatures_lists;
ALTER TABLE passage_signatures
    DROP COLUMN list_id, DROP COLUMN code, DROP COLUMN mail_folder_id, DROP COLUMN sent_at;
DROP TABLE vector_index_lists;
DROP TABLE vector_index_generations;
DROP TABLE vector_indexes;
