COMMENT ON COLUMN email_search_documents.body_text_untrimmed IS NULL;
