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
-- vector (unit length, little-endian float32) and its binary-quantized
-- signature (one sign bit per dimension). Semantic search scans the
-- signatures with bit_count(signature # query) for a few hundred
-- candidates and re-ranks them by the full vectors. The vector is kept out
-- of line (toast_tuple_target, STORAGE EXTERNAL) so that scan reads a
-- narrow heap of ids and signatures only. A vector goes with its passage.
CREATE TABLE passage_vectors (
    stored_email_id uuid     NOT NULL,
    ordinal         smallint NOT NULL,
    profile_id      smallint NOT NULL REFERENCES embedding_profiles (id) ON DELETE CASCADE,
    signature       bit varying NOT NULL,
    vector          bytea    NOT NULL,
    embedded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stored_email_id, ordinal, profile_id),
    FOREIGN KEY (stored_email_id, ordinal) REFERENCES email_passages (stored_email_id, ordinal) ON DELETE CASCADE
) WITH (toast_tuple_target = 128);
ALTER TABLE passage_vectors ALTER COLUMN vector SET STORAGE EXTERNAL;
CREATE INDEX ix_passage_vectors_profile ON passage_vectors (profile_id);
