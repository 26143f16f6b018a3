-- The outlier lists' passages go back to the pending list, which every
-- search reads and the index's next step assigns.
UPDATE passage_signatures SET list_id = 0 WHERE list_id <> 0 AND list_id & 65535 = 0;
ALTER TABLE vector_index_generations DROP COLUMN outlier_below;
