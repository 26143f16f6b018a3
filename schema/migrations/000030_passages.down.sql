DROP TABLE IF EXISTS email_passages;
