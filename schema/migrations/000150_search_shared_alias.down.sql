-- mailfathom_search as version 71 left it: an alias narrows to the
-- folders of its own, holders alone.
DROP FUNCTION mailfathom_search(regconfig, text, text[], text, text, integer, integer);
CREATE FUNCTION mailfathom_search(
    configuration regconfig, query text, accounts text[],
    account text DEFAULT NULL, alias text DEFAULT NULL,
    max_hits integer DEFAULT 20, rank_window integer DEFAULT 1000)
RETURNS TABLE (stored_email_id uuid, account_key text, folder_alias text, sent_at timestamptz,
               sender text, subject text, rank real)
LANGUAGE plpgsql
-- A parallel plan costs more to start than any strategy takes.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    tsq tsquery := websearch_to_tsquery(configuration, query);
    folders bigint[];
    plan record;
    matches text;
BEGIN
    SELECT coalesce(array_agg(f.id), '{}') INTO folders
    FROM mail_folders f JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
    WHERE a.account_key = ANY(accounts)
      AND (mailfathom_search.account IS NULL OR a.account_key = mailfathom_search.account)
      AND (mailfathom_search.alias IS NULL OR f.alias = mailfathom_search.alias);
    IF folders = '{}' OR numnode(tsq) = 0 THEN
        RETURN;
    END IF;
    plan := mailfathom_search_strategy(configuration, query, rank_window);
    matches := CASE plan.strategy
        WHEN 'recent' THEN 'mailfathom_search_recent($1, $2, $3)'
        WHEN 'window' THEN 'mailfathom_search_windowed($1, $2, $3, $5)'
        ELSE 'mailfathom_search_matching($1, $2, $3)' END;
    RETURN QUERY EXECUTE format($q$
        WITH recent AS MATERIALIZED (SELECT * FROM %s),
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
    USING tsq, folders, rank_window, max_hits, plan.estimated_matches;
END
$$;

DROP FUNCTION mailfathom_search_shared(tsquery, bigint[], integer, text);
