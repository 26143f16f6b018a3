-- Forward synchronization: the envelope values the forward pass stores with
-- each occurrence, and the durable audit of alias bindings.

-- The envelope the server reported for an occurrence. A later pass enriches
-- these from the MIME itself; until then they are what the forward pass
-- fetched (NULL when the envelope carried none).
ALTER TABLE stored_emails
    ADD COLUMN subject    text,
    ADD COLUMN message_id text,
    ADD COLUMN sent_at    timestamptz;

-- mail_folder_mapping_changes records every binding change of an alias: a
-- first binding (generation 1, no previous path) and every repointing (a new
-- generation naming the path it replaced). It is written in the same
-- transaction as the mail_folders row it describes, so a committed
-- generation always has its audit record and a rolled-back one never does.
-- A remote path can carry personal or organizational information; besides
-- mail_folders this table is the only place one is written.
CREATE TABLE mail_folder_mapping_changes (
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mailbox_account_id   bigint      NOT NULL REFERENCES mailbox_accounts (id) ON DELETE CASCADE,
    alias                text        NOT NULL,
    generation           integer     NOT NULL,
    previous_remote_path text,
    remote_path          text        NOT NULL,
    changed_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mail_folder_mapping_changes_generation_positive CHECK (generation >= 1),
    CONSTRAINT mail_folder_mapping_changes_first_has_no_previous
        CHECK ((generation = 1) = (previous_remote_path IS NULL))
);

-- An alias's history, in generation order. Not unique: the audit must never
-- be the reason a binding cannot be committed (a mail_folders row deleted by
-- hand lets its generation be bound again, and both records are kept).
CREATE INDEX ix_mail_folder_mapping_changes_account_alias
    ON mail_folder_mapping_changes (mailbox_account_id, alias, generation);

-- LatestBinding's "ORDER BY generation DESC LIMIT 1" is served by
-- mail_folders_account_alias_generation_key; StoredUIDs by
-- ix_stored_emails_folder_uid. Neither needs another index.
