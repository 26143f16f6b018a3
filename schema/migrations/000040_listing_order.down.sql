DROP INDEX IF EXISTS ix_stored_emails_listing_order;
