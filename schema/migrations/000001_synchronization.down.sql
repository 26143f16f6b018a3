DROP TABLE synchronization_checkpoints;
DROP TABLE email_message_contents;
DROP TABLE stored_emails;
DROP TABLE mail_folders;
DROP TABLE mailbox_accounts;
