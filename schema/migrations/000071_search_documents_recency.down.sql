DROP FUNCTION mailfathom_search(regconfig, text, text[], text, text, integer, integer);
DROP FUNCTION mailfathom_search_strategy(regconfig, text, integer);
DROP FUNCTION mailfathom_search_windowed(tsquery, bigint[], integer, double precision);
DROP FUNCTION mailfathom_search_window(tsquery, bigint[], integer, timestamptz);
DROP TRIGGER stored_emails_search_documents_follow ON stored_emails;
DROP FUNCTION mailfathom_search_documents_follow();
DROP INDEX ix_email_search_documents_recent;
ALTER TABLE email_search_documents DROP COLUMN sent_at, DROP COLUMN mail_folder_id;

-- The strategy and search as they were before the window.
CREATE FUNCTION mailfathom_search_strategy(
    configuration regconfig, query text, rank_window integer DEFAULT 1000,
    OUT strategy text, OUT estimated_matches double precision, OUT documents double precision)
LANGUAGE plpgsql
AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT 1 FROM email_search_documents WHERE search_vector @@ $1'
        INTO plan USING websearch_to_tsquery(configuration, query);
    estimated_matches := (plan -> 0 -> 'Plan' ->> 'Plan Rows')::double precision;
    SELECT greatest(c.reltuples, 1) INTO documents FROM pg_class c WHERE c.oid = 'email_search_documents'::regclass;
    strategy := CASE WHEN estimated_matches * estimated_matches > rank_window * documents THEN 'recent' ELSE 'index' END;
END
$$;

CREATE FUNCTION mailfathom_search(
    configuration regconfig, query text, accounts text[],
    account text DEFAULT NULL, alias text DEFAULT NULL,
    max_hits integer DEFAULT 20, rank_window integer DEFAULT 1000)
RETURNS TABLE (stored_email_id uuid, account_key text, folder_alias text, sent_at timestamptz,
               sender text, subject text, rank real)
LANGUAGE plpgsql
-- A parallel plan costs more to start than either strategy takes.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    tsq tsquery := websearch_to_tsquery(configuration, query);
    folders bigint[];
    matches name;
BEGIN
    SELECT coalesce(array_agg(f.id), '{}') INTO folders
    FROM mail_folders f JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
    WHERE a.account_key = ANY(accounts)
      AND (mailfathom_search.account IS NULL OR a.account_key = mailfathom_search.account)
      AND (mailfathom_search.alias IS NULL OR f.alias = mailfathom_search.alias);
    IF folders = '{}' OR numnode(tsq) = 0 THEN
        RETURN;
    END IF;
    IF (mailfathom_search_strategy(configuration, query, rank_window)).strategy = 'recent' THEN
        matches := 'mailfathom_search_recent';
    ELSE
        matches := 'mailfathom_search_matching';
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH recent AS MATERIALIZED (SELECT * FROM %I($1, $2, $3)),
        ranked AS MATERIALIZED (
            SELECT r.id, r.mail_folder_id, r.sent_at, r.subject, ts_rank(r.v, $1) AS rank
            FROM recent r
            ORDER BY rank DESC, r.sent_at DESC NULLS LAST, r.id DESC
            LIMIT $4)
        SELECT r.id, a.account_key, f.alias, r.sent_at,
               coalesce((SELECT p.address FROM email_participants p
                         WHERE p.stored_email_id = r.id AND p.role = 'From' ORDER BY p.position LIMIT 1), ''),
               coalesce(r.subject, ''), r.rank
        FROM ranked r
        JOIN mail_folders f ON f.id = r.mail_folder_id
        JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
        ORDER BY r.rank DESC, r.sent_at DESC NULLS LAST, r.id DESC $q$, matches)
    USING tsq, folders, rank_window, max_hits;
END
$$;
