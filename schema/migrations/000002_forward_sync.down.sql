DROP TABLE mail_folder_mapping_changes;

ALTER TABLE stored_emails
    DROP COLUMN sent_at,
    DROP COLUMN message_id,
    DROP COLUMN subject;
