-- A search document stores its untrimmed body text only when trimming
-- removed something: NULL in body_text_untrimmed beside a body_text means
-- nothing was trimmed and body_text is the untrimmed reading, so
-- coalesce(body_text_untrimmed, body_text) is the untrimmed text of every
-- row, written before or after this migration. Storing the same text twice
-- cost a first synchronization about 0.07 ms of PostgreSQL CPU per message.
COMMENT ON COLUMN email_search_documents.body_text_untrimmed IS
    'The body text before quoted history and signatures were trimmed from its end; NULL when nothing was trimmed (body_text is then the untrimmed text): read coalesce(body_text_untrimmed, body_text).';
