ALTER TABLE embedding_profiles DROP COLUMN answered_model;
