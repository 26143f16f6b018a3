-- Lexical search that stays fast as mail grows: one function answers
-- every search, finding a rare query's matches through the index and
-- walking the mail newest first for a common one.
--
-- A search document's vector is kept compressed inside its row rather
-- than in the TOAST table: checking one document against a query (and
-- ranking it) then reads one page, not the TOAST index and its chunks,
-- which made both six to ten times slower at 100 000 documents. Documents written before this
-- migration keep their out-of-line vector until they are written again
-- (`mailfathom reindex-search` rewrites them all).
ALTER TABLE email_search_documents
    ALTER COLUMN search_vector SET STORAGE MAIN,
    ALTER COLUMN search_vector SET COMPRESSION lz4;

-- The order search walks served mail in when a query matches much of it:
-- most recently sent first, the id breaking ties.
CREATE INDEX ix_stored_emails_recent ON stored_emails (sent_at DESC NULLS LAST, id DESC);

-- mailfathom_search_strategy is how mailfathom_search finds a query's
-- matches, from the planner's estimate of how many documents match it:
-- 'index' collects every match through the search vector's index (a rare
-- query), 'recent' walks the served mail newest first and stops at
-- rank_window matches (a common one). Both find the same matches; the
-- estimate decides only which is cheaper: collecting costs about one page
-- per match, walking about one page per message walked, rank_window /
-- (matches / documents) of them.
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

-- mailfathom_search_recent returns the rank_window most recently sent
-- matches of tsq in the served mail of folders, walking the mail newest
-- first through ix_stored_emails_recent and checking each message's
-- document as it comes. Left to itself the planner collects every match
-- instead (it cannot know a common word's matches are spread evenly over
-- time), which is what this walk exists to avoid; the settings leave it
-- the walk.
CREATE FUNCTION mailfathom_search_recent(tsq tsquery, folders bigint[], rank_window integer)
RETURNS TABLE (id uuid, mail_folder_id bigint, sent_at timestamptz, subject text, v tsvector)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET max_parallel_workers_per_gather = 0
AS $$
    SELECT e.id, e.mail_folder_id, e.sent_at, e.subject, d.search_vector
    FROM served_stored_emails e
    JOIN email_search_documents d ON d.stored_email_id = e.id
    WHERE e.mail_folder_id = ANY(folders) AND d.search_vector @@ tsq
    ORDER BY e.sent_at DESC NULLS LAST, e.id DESC
    LIMIT rank_window
$$;

-- mailfathom_search_matching returns the same as mailfathom_search_recent
-- by collecting every match of tsq through the search vector's index
-- first, then keeping the rank_window most recently sent of those served
-- in folders: each match is looked up by its id. Left to itself the
-- planner reads the whole of stored_emails into a hash table instead,
-- which costs more than a rare query's lookups; the settings leave it the
-- lookups.
CREATE FUNCTION mailfathom_search_matching(tsq tsquery, folders bigint[], rank_window integer)
RETURNS TABLE (id uuid, mail_folder_id bigint, sent_at timestamptz, subject text, v tsvector)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET max_parallel_workers_per_gather = 0
AS $$
    WITH found AS MATERIALIZED (
        -- Only the ids: a vector is read again for the window alone.
        SELECT d.stored_email_id AS id FROM email_search_documents d WHERE d.search_vector @@ tsq),
    recent AS MATERIALIZED (
        SELECT e.id, e.mail_folder_id, e.sent_at, e.subject
        FROM found m JOIN served_stored_emails e ON e.id = m.id
        WHERE e.mail_folder_id = ANY(folders)
        ORDER BY e.sent_at DESC NULLS LAST, e.id DESC
        LIMIT rank_window)
    SELECT r.id, r.mail_folder_id, r.sent_at, r.subject, d.search_vector
    FROM recent r JOIN email_search_documents d ON d.stored_email_id = r.id
$$;

-- mailfathom_search is lexical search over the served mail
-- (served_stored_emails) of the accounts named, narrowed to one account
-- and one folder alias when those are given: the rank_window most recently
-- sent matches are ranked (every match, when there are fewer) and the
-- max_hits best returned, ties most recent first. The narrowing applies
-- before the window: a narrowed search ranks the narrowed mail's most
-- recent matches. `mailfathom search` and the HTTP and MCP searches call
-- it with the default window.
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
