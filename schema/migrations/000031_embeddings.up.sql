-- embedding_profiles are the model and dimensions vectors were computed
-- under: a profile's identity. Vectors of two profiles are never compared,
-- so a changed model embeds everything again under a profile of its own.
CREATE TABLE embedding_profiles (
    id         smallint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model      text        NOT NULL,
    dimensions integer     NOT NULL CHECK (dimensions BETWEEN 1 AND 8192),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (model, dimensions)
);

-- passage_vectors is one passage's embedding under one profile: the full
-- vector, unit length, as little-endian float32. A vector goes with its
-- passage.
CREATE TABLE passage_vectors (
    stored_email_id uuid     NOT NULL,
    ordinal         smallint NOT NULL,
    profile_id      smallint NOT NULL REFERENCES embedding_profiles (id) ON DELETE CASCADE,
    vector          bytea    NOT NULL,
    embedded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stored_email_id, ordinal, profile_id),
    FOREIGN KEY (stored_email_id, ordinal) REFERENCES email_passages (stored_email_id, ordinal) ON DELETE CASCADE
);
ALTER TABLE passage_vectors ALTER COLUMN vector SET STORAGE EXTERNAL;

-- passage_signatures is the binary quantization of each vector (one sign
-- bit per dimension), written with it. Semantic search scans these with
-- bit_count(signature # query) for a few hundred candidates and re-ranks
-- them by their full vectors. They are a table of their own so the scan
-- reads about 100 bytes a passage rather than the vector's 4 per
-- dimension: a vector under 2 kB is never moved out of line.
CREATE TABLE passage_signatures (
    stored_email_id uuid        NOT NULL,
    ordinal         smallint    NOT NULL,
    profile_id      smallint    NOT NULL,
    signature       bit varying NOT NULL,
    PRIMARY KEY (stored_email_id, ordinal, profile_id),
    FOREIGN KEY (stored_email_id, ordinal, profile_id)
        REFERENCES passage_vectors (stored_email_id, ordinal, profile_id) ON DELETE CASCADE
);
-- The scan is one pass of about 0.2 µs a signature; a parallel plan's
-- gather and merge cost three times what it saved at 100 000 passages on
-- two busy cores, so the scan stays in one process.
ALTER TABLE passage_signatures SET (parallel_workers = 0);
CREATE INDEX ix_passage_vectors_profile ON passage_vectors (profile_id);
