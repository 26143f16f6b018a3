DROP VIEW served_stored_emails;
ALTER TABLE mail_folders DROP COLUMN served_uid_validity;
