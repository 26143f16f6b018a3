DROP TABLE withheld_contents;
DELETE FROM stored_emails WHERE content_availability = 'ContentWithheld';
ALTER TABLE stored_emails DROP CONSTRAINT stored_emails_content_availability_known;
ALTER TABLE stored_emails ADD CONSTRAINT stored_emails_content_availability_known
    CHECK (content_availability IN ('Available', 'ExceededSizeLimit', 'NotFetched'));
