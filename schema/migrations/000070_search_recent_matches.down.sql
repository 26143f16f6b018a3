DROP FUNCTION mailfathom_search(regconfig, text, text[], text, text, integer, integer);
DROP FUNCTION mailfathom_search_matching(tsquery, bigint[], integer);
DROP FUNCTION mailfathom_search_recent(tsquery, bigint[], integer);
DROP FUNCTION mailfathom_search_strategy(regconfig, text, integer);
DROP INDEX ix_stored_emails_recent;
ALTER TABLE email_search_documents
    ALTER COLUMN search_vector SET STORAGE EXTENDED,
    ALTER COLUMN search_vector SET COMPRESSION DEFAULT;
