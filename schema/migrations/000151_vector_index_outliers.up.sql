-- A generation's outlier list: the passages less like their nearest
-- centroid than outlier_below. A passage far from every centroid (mail
-- unlike anything the lists were trained on, a needle among a mailbox of
-- one kind) lands in a list whose centroid a query near it need not rank
-- among those it probes, so such passages are kept apart, in list number
-- 0 of their generation (list_id generation << 16), which every search
-- reads whole. A generation trained before this has no outlier list:
-- nothing is less similar than -Infinity.
ALTER TABLE vector_index_generations
    ADD COLUMN outlier_below real NOT NULL DEFAULT '-Infinity';
