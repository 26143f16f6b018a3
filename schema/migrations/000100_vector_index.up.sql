-- The vector index: inverted lists of passages under each embedding
-- profile, kept in PostgreSQL so every replica answers a search alike.
--
-- A generation of the index is a set of lists, each with a centroid trained
-- by k-means on a sample of the profile's vectors. Every passage's
-- signature row names the list it is in (list_id), carries a 4-bit code of
-- its vector and copies of its message's folder and sending date, so a
-- search reads the nearest lists' codes alone — one range of one covering
-- index per list — and re-ranks a few by their full vectors.
--
-- list_id is generation << 16 | list number (1 to 65 535): 0 is the
-- pending list of passages in no list yet. Every search reads the whole
-- range below its oldest live generation's lists — the pending list, and
-- any passage an embed job wrote into a generation a newer one replaced
-- meanwhile — so a passage is always found, and the index's next step
-- assigns those.

-- vector_indexes is a profile's index: the generation searches probe
-- (serving) and the one being built (building), 0 for none. Only the
-- vector_index jobs change it.
CREATE TABLE vector_indexes (
    profile_id smallint PRIMARY KEY REFERENCES embedding_profiles (id) ON DELETE CASCADE,
    serving    smallint NOT NULL DEFAULT 0,
    building   smallint NOT NULL DEFAULT 0,
    -- trained is the newest generation trained: the next is trained + 1.
    trained    smallint NOT NULL DEFAULT 0,
    CONSTRAINT vector_indexes_generations CHECK (serving >= 0 AND building >= 0 AND trained >= greatest(serving, building))
);

-- vector_index_generations describes each generation still live.
CREATE TABLE vector_index_generations (
    profile_id smallint    NOT NULL REFERENCES vector_indexes (profile_id) ON DELETE CASCADE,
    generation smallint    NOT NULL CHECK (generation > 0),
    lists      integer     NOT NULL CHECK (lists BETWEEN 1 AND 65535),
    -- passages is how many passages the profile held when it was trained.
    passages   bigint      NOT NULL,
    trained_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (profile_id, generation)
);

-- vector_index_lists are a generation's centroids: unit length,
-- little-endian float32, as the vectors are stored.
CREATE TABLE vector_index_lists (
    profile_id smallint NOT NULL,
    generation smallint NOT NULL,
    list_no    integer  NOT NULL CHECK (list_no BETWEEN 1 AND 65535),
    centroid   bytea    NOT NULL,
    PRIMARY KEY (profile_id, generation, list_no),
    FOREIGN KEY (profile_id, generation) REFERENCES vector_index_generations (profile_id, generation) ON DELETE CASCADE
);

-- Existing rows are pending: the first build assigns them and writes their
-- codes and copies, so adding the columns rewrites nothing.
ALTER TABLE passage_signatures
    ADD COLUMN list_id        integer NOT NULL DEFAULT 0,
    ADD COLUMN code           bytea,
    ADD COLUMN mail_folder_id bigint,
    ADD COLUMN sent_at        timestamptz;
-- A passage with a code needs no signature: only passages without one
-- (stored before codes existed, or of a profile with more dimensions than
-- a code holds) are ranked by their sign bits.
ALTER TABLE passage_signatures ALTER COLUMN signature DROP NOT NULL;
-- A code is read on every probe: never compressed, never out of line (at
-- most 2 052 bytes, for 4 096 dimensions).
ALTER TABLE passage_signatures ALTER COLUMN code SET STORAGE PLAIN;

-- A list's passages are one range of this index, and a probe reads them
-- from the index alone (an index-only scan): the rows of one list stay
-- together however the heap is ordered, as mail arrives. The profile leads,
-- so no search reads another profile's rows.
CREATE INDEX ix_passage_signatures_lists ON passage_signatures (profile_id, list_id)
    INCLUDE (stored_email_id, ordinal, mail_folder_id, sent_at, code);

-- The profile index of the vectors served only reading them by profile,
-- which now goes through the lists index; dropping it keeps an embed job's
-- writes to one index entry more than before rather than two.
DROP INDEX ix_passage_vectors_profile;

-- mailfathom_passage_signatures_follow keeps the signatures' copies of
-- their stored email's folder and sending date in step when either
-- changes (a relocation carries the email to another folder).
CREATE FUNCTION mailfathom_passage_signatures_follow() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE passage_signatures SET sent_at = NEW.sent_at, mail_folder_id = NEW.mail_folder_id
    WHERE stored_email_id = NEW.id
      AND (sent_at IS DISTINCT FROM NEW.sent_at OR mail_folder_id IS DISTINCT FROM NEW.mail_folder_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER stored_emails_passage_signatures_follow
AFTER UPDATE OF sent_at, mail_folder_id ON stored_emails
FOR EACH ROW
WHEN (OLD.sent_at IS DISTINCT FROM NEW.sent_at OR OLD.mail_folder_id IS DISTINCT FROM NEW.mail_folder_id)
EXECUTE FUNCTION mailfathom_passage_signatures_follow();

-- mailfathom_vector_codes returns the codes of a profile's passages in
-- lists, and in every list below below (the pending list and older
-- generations'), of messages in folders, sent in [since, until) when
-- those are given: a probe. It reads the lists index alone, never the
-- table: left to itself the planner scanned the whole table — every
-- profile's rows — once the profile's pending list held a quarter of them
-- and their pages were not yet all-visible.
CREATE FUNCTION mailfathom_vector_codes(
    profile smallint, lists integer[], below integer, folders bigint[], since timestamptz, until timestamptz)
RETURNS TABLE (stored_email_id uuid, ordinal smallint, code bytea)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET max_parallel_workers_per_gather = 0
AS $$
    SELECT s.stored_email_id, s.ordinal, s.code
    FROM passage_signatures s
    WHERE s.profile_id = profile AND s.list_id = ANY(lists) AND s.mail_folder_id = ANY(folders)
      AND (since IS NULL OR s.sent_at >= since) AND (until IS NULL OR s.sent_at < until)
    UNION ALL
    SELECT s.stored_email_id, s.ordinal, s.code
    FROM passage_signatures s
    WHERE s.profile_id = profile AND s.list_id < below AND s.mail_folder_id = ANY(folders)
      AND (since IS NULL OR s.sent_at >= since) AND (until IS NULL OR s.sent_at < until)
$$;

-- mailfathom_vector_uncoded reports whether any of a profile's passages
-- has no code (stored before codes existed: pending until the index's
-- first build), through the lists index alone.
CREATE FUNCTION mailfathom_vector_uncoded(profile smallint)
RETURNS boolean
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
    SELECT EXISTS (SELECT 1 FROM passage_signatures s WHERE s.profile_id = profile AND s.list_id = 0 AND s.code IS NULL)
$$;
