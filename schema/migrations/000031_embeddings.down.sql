DROP TABLE IF EXISTS passage_signatures;
DROP TABLE IF EXISTS passage_vectors;
DROP TABLE IF EXISTS embedding_profiles;
