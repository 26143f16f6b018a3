-- A search document carries its message's sending date and folder, so a
-- query matching a few percent of the mail reads only its newest matches:
-- the search vector's index ANDed with a range of the documents' own
-- recency index, rather than every match followed by a look-up of its
-- stored email. The copies are written by the statements that write the
-- document and kept in step by the trigger below when a stored email's
-- sending date or folder changes.
ALTER TABLE email_search_documents
    ADD COLUMN sent_at timestamptz,
    ADD COLUMN mail_folder_id bigint;

-- Filling the copies rewrites every document, and PostgreSQL recomputes
-- each row's stored search vector as it does: 168 s for 100 000 documents
-- on a busy two-core machine (load average 8 to 10), during which writes of
-- documents wait, and the table holds a dead copy of every row until
-- VACUUM (autovacuum, or by hand) reclaims it.
UPDATE email_search_documents d SET sent_at = e.sent_at, mail_folder_id = e.mail_folder_id
FROM stored_emails e WHERE e.id = d.stored_email_id;

-- The documents most recently sent first, the id breaking ties: the same
-- order search ranks its window in.
CREATE INDEX ix_email_search_documents_recent ON email_search_documents (sent_at DESC NULLS LAST, stored_email_id DESC);

-- mailfathom_search_documents_follow keeps a document's copies of its
-- stored email's sending date and folder in step when either changes
-- (a rewritten occurrence can read a different date). It does not write
-- a document that is unchanged, since rewriting one recomputes its vector.
CREATE FUNCTION mailfathom_search_documents_follow() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE email_search_documents SET sent_at = NEW.sent_at, mail_folder_id = NEW.mail_folder_id
    WHERE stored_email_id = NEW.id
      AND (sent_at IS DISTINCT FROM NEW.sent_at OR mail_folder_id IS DISTINCT FROM NEW.mail_folder_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER stored_emails_search_documents_follow
AFTER UPDATE OF sent_at, mail_folder_id ON stored_emails
FOR EACH ROW
WHEN (OLD.sent_at IS DISTINCT FROM NEW.sent_at OR OLD.mail_folder_id IS DISTINCT FROM NEW.mail_folder_id)
EXECUTE FUNCTION mailfathom_search_documents_follow();

-- mailfathom_search_window returns the same as mailfathom_search_recent
-- by reading only the matches of tsq sent on or after since: the search
-- vector's index ANDed with a range of ix_email_search_documents_recent,
-- then the served check on those alone. It returns fewer than rank_window
-- rows when fewer of those matches are served in folders, and then says
-- nothing about the mail sent before since; a document without a sending
-- date is never in the range.
CREATE FUNCTION mailfathom_search_window(tsq tsquery, folders bigint[], rank_window integer, since timestamptz)
RETURNS TABLE (id uuid, mail_folder_id bigint, sent_at timestamptz, subject text, document tid)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET max_parallel_workers_per_gather = 0
AS $$
    -- The range's matches newest first by their documents' own copies,
    -- so the served check stops at the rank_window-th served one.
    SELECT e.id, e.mail_folder_id, e.sent_at, e.subject, m.document
    FROM (SELECT d.stored_email_id, d.sent_at, d.ctid AS document
          FROM email_search_documents d
          WHERE d.search_vector @@ tsq AND d.sent_at >= since AND d.mail_folder_id = ANY(folders)
          ORDER BY d.sent_at DESC NULLS LAST, d.stored_email_id DESC) m
    JOIN served_stored_emails e ON e.id = m.stored_email_id
    WHERE e.mail_folder_id = ANY(folders)
    ORDER BY m.sent_at DESC NULLS LAST, m.stored_email_id DESC
    LIMIT rank_window
$$;

-- mailfathom_search_windowed returns the same as mailfathom_search_recent
-- through mailfathom_search_window, starting from the range of the newest
-- documents expected to hold one and a half times rank_window matches
-- (from the planner's estimate and the documents' sending-date
-- histogram) and widening it fourfold while it holds fewer than
-- rank_window served matches in folders. Once the range would take in
-- all the mail (or no histogram says where it starts), every match is
-- collected instead (mailfathom_search_matching), which also reaches the
-- documents without a sending date. The range's rank_window most recent
-- matches are the whole mail's: everything outside it was sent earlier,
-- or has no date and ranks last.
CREATE FUNCTION mailfathom_search_windowed(
    tsq tsquery, folders bigint[], rank_window integer, estimated_matches double precision)
RETURNS TABLE (id uuid, mail_folder_id bigint, sent_at timestamptz, subject text, v tsvector)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    bounds timestamptz[];
    dated double precision;
    share double precision := 1.5 * rank_window / greatest(estimated_matches, 1);
    since timestamptz;
    ids uuid[]; fids bigint[]; sents timestamptz[]; subjects text[]; documents tid[];
BEGIN
    SELECT s.histogram_bounds::text::timestamptz[], 1 - s.null_frac INTO bounds, dated
    FROM pg_stats s
    WHERE s.schemaname = current_schema() AND s.tablename = 'email_search_documents' AND s.attname = 'sent_at';
    WHILE bounds IS NOT NULL AND share < dated LOOP
        -- The bound below which about 1 - share / dated of the dated
        -- documents lie, rounded down to a histogram bound.
        since := bounds[1 + floor((cardinality(bounds) - 1) * (1 - share / dated))::integer];
        SELECT array_agg(w.id), array_agg(w.mail_folder_id), array_agg(w.sent_at), array_agg(w.subject), array_agg(w.document)
        INTO ids, fids, sents, subjects, documents
        FROM mailfathom_search_window(tsq, folders, rank_window, since) w;
        IF cardinality(ids) >= rank_window THEN
            -- The vectors of the window alone, each read where the range
            -- found it (the row this statement's snapshot saw there).
            RETURN QUERY SELECT w.wid, w.wfolder, w.wsent, w.wsubject, d.search_vector
                FROM unnest(ids, fids, sents, subjects, documents) AS w(wid, wfolder, wsent, wsubject, wdocument)
                JOIN email_search_documents d ON d.ctid = w.wdocument;
            RETURN;
        END IF;
        share := share * 4;
    END LOOP;
    RETURN QUERY SELECT * FROM mailfathom_search_matching(tsq, folders, rank_window);
END
$$;

-- mailfathom_search_strategy is how mailfathom_search finds a query's
-- matches, from the planner's estimate of how many documents match it:
-- 'index' collects every match through the search vector's index (a rare
-- query: at most three times rank_window matches), 'window'
-- reads only the matches in a range of the newest documents
-- (mailfathom_search_windowed), 'recent' walks the served mail newest
-- first and stops at rank_window matches (a common query). All find the
-- same matches; the estimate decides only which is cheaper. Collecting
-- touches every match, about seven pages each; the window reads the
-- index entries of every match but touches only about one and a half
-- times rank_window of them (about six pages each, the served check
-- stopping at the rank_window-th); the walk touches rank_window /
-- (matches / documents) messages, about six pages each, and reads no
-- index entries. Measured at 100 000 documents the window took a third of
-- the time collecting did from three times rank_window matches, and the
-- walk a third of the window's time from a third of the documents.
DROP FUNCTION mailfathom_search_strategy(regconfig, text, integer);
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
    strategy := CASE
        WHEN estimated_matches <= 3 * rank_window THEN 'index'
        WHEN estimated_matches * estimated_matches <= 4 * rank_window * documents THEN 'window'
        ELSE 'recent' END;
END
$$;

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
