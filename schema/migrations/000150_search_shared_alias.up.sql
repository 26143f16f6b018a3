-- A message stored once for several folders (Gmail's X-GM-MSGID) has its
-- search document under its holder row, in the holder's folder; its other
-- folders hold occurrences that share it. A search narrowed to a folder
-- alias finds it in every folder one of its occurrences lives in, as the
-- listings' alias filter does.

-- mailfathom_search_shared returns the same as mailfathom_search_matching
-- for the mail in folder alias alias of folders (the accounts' folders):
-- every match of tsq collected through the search vector's index, then
-- the rank_window most recently sent of those served whose own occurrence
-- lives in a folder of the alias, or one that shares them does (no
-- tombstone, of its folder's served UID space). It is for an alias whose
-- folders hold such shared occurrences; collecting every match costs what
-- the index strategy does, so a common word is slower than through the
-- recency strategies, which know each email by its holder's folder alone.
CREATE FUNCTION mailfathom_search_shared(tsq tsquery, folders bigint[], rank_window integer, alias text)
RETURNS TABLE (id uuid, mail_folder_id bigint, sent_at timestamptz, subject text, v tsvector)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET max_parallel_workers_per_gather = 0
AS $$
    WITH found AS MATERIALIZED (
        SELECT d.stored_email_id AS id FROM email_search_documents d WHERE d.search_vector @@ tsq),
    recent AS MATERIALIZED (
        SELECT e.id, e.mail_folder_id, e.sent_at, e.subject
        FROM found m JOIN served_stored_emails e ON e.id = m.id
        JOIN mail_folders f ON f.id = e.mail_folder_id
        WHERE e.mail_folder_id = ANY(folders)
          AND ((f.alias = mailfathom_search_shared.alias AND e.remote_expunge_observed_at IS NULL
                AND (f.served_uid_validity IS NULL OR e.uid_validity = f.served_uid_validity))
            OR EXISTS (SELECT 1 FROM stored_emails o JOIN mail_folders g ON g.id = o.mail_folder_id
                WHERE o.shared_email_id = e.id AND g.alias = mailfathom_search_shared.alias
                  AND o.remote_expunge_observed_at IS NULL
                  AND (g.served_uid_validity IS NULL OR o.uid_validity = g.served_uid_validity)))
        ORDER BY e.sent_at DESC NULLS LAST, e.id DESC
        LIMIT rank_window)
    SELECT r.id, r.mail_folder_id, r.sent_at, r.subject, d.search_vector
    FROM recent r JOIN email_search_documents d ON d.stored_email_id = r.id
$$;

-- mailfathom_search as before, but an alias a folder of which holds a live
-- occurrence of an email held elsewhere is searched through
-- mailfathom_search_shared over the accounts' every folder.
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
    shared boolean := false;
    plan record;
    estimated double precision;
    matches text;
BEGIN
    IF mailfathom_search.alias IS NOT NULL THEN
        SELECT EXISTS (SELECT 1 FROM stored_emails o
            JOIN mail_folders g ON g.id = o.mail_folder_id
            JOIN mailbox_accounts a ON a.id = g.mailbox_account_id
            WHERE o.shared_email_id IS NOT NULL AND g.alias = mailfathom_search.alias
              AND a.account_key = ANY(accounts)
              AND (mailfathom_search.account IS NULL OR a.account_key = mailfathom_search.account)
              AND o.remote_expunge_observed_at IS NULL
              AND (g.served_uid_validity IS NULL OR o.uid_validity = g.served_uid_validity))
        INTO shared;
    END IF;
    SELECT coalesce(array_agg(f.id), '{}') INTO folders
    FROM mail_folders f JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
    WHERE a.account_key = ANY(accounts)
      AND (mailfathom_search.account IS NULL OR a.account_key = mailfathom_search.account)
      AND (mailfathom_search.alias IS NULL OR shared OR f.alias = mailfathom_search.alias);
    IF folders = '{}' OR numnode(tsq) = 0 THEN
        RETURN;
    END IF;
    IF shared THEN
        matches := 'mailfathom_search_shared($1, $2, $3, $6)';
    ELSE
        plan := mailfathom_search_strategy(configuration, query, rank_window);
        matches := CASE plan.strategy
            WHEN 'recent' THEN 'mailfathom_search_recent($1, $2, $3)'
            WHEN 'window' THEN 'mailfathom_search_windowed($1, $2, $3, $5)'
            ELSE 'mailfathom_search_matching($1, $2, $3)' END;
        estimated := plan.estimated_matches;
    END IF;
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
    USING tsq, folders, rank_window, max_hits, estimated, mailfathom_search.alias;
END
$$;
