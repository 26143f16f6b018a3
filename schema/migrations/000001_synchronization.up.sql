-- The synchronization model: accounts, alias bindings, stored email
-- occurrences, their raw MIME, and per-binding checkpoints.

-- mailbox_accounts is one configured account, identified by its normalized
-- account identifier (trimmed, case-folded by the configuration layer).
CREATE TABLE mailbox_accounts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_key text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mailbox_accounts_account_key_key UNIQUE (account_key),
    CONSTRAINT mailbox_accounts_account_key_not_blank CHECK (btrim(account_key) <> '')
);

-- mail_folders is one alias binding: an alias resolved to one remote folder
-- under a resolution generation. Repointing an alias commits a new
-- generation (a new row, with no checkpoint), so the occurrence identity of
-- stored mail always names the folder it actually came from.
CREATE TABLE mail_folders (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mailbox_account_id  bigint      NOT NULL REFERENCES mailbox_accounts (id) ON DELETE CASCADE,
    alias               text        NOT NULL,
    generation          integer     NOT NULL,
    remote_path         text        NOT NULL,
    hierarchy_delimiter text,
    bound_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mail_folders_account_alias_generation_key UNIQUE (mailbox_account_id, alias, generation),
    CONSTRAINT mail_folders_generation_positive CHECK (generation >= 1),
    CONSTRAINT mail_folders_alias_not_blank CHECK (btrim(alias) <> '')
);

-- stored_emails is one remote occurrence: (account, binding, UIDVALIDITY,
-- UID) is its identity and every write is an upsert on it. The id is a
-- UUIDv7 minted by the application, shared by every row derived from it.
CREATE TABLE stored_emails (
    id                         uuid        PRIMARY KEY,
    mailbox_account_id         bigint      NOT NULL REFERENCES mailbox_accounts (id) ON DELETE CASCADE,
    mail_folder_id             bigint      NOT NULL REFERENCES mail_folders (id) ON DELETE CASCADE,
    uid_validity               bigint      NOT NULL,
    uid                        bigint      NOT NULL,
    content_availability       text        NOT NULL,
    rfc822_size                bigint,
    internal_date              timestamptz,
    remote_flags               text[]      NOT NULL DEFAULT '{}',
    remote_flags_observed_at   timestamptz,
    remote_expunge_observed_at timestamptz,
    first_stored_at            timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stored_emails_occurrence_key UNIQUE (mailbox_account_id, mail_folder_id, uid_validity, uid),
    CONSTRAINT stored_emails_uid_validity_range CHECK (uid_validity BETWEEN 1 AND 4294967295),
    CONSTRAINT stored_emails_uid_range CHECK (uid BETWEEN 1 AND 4294967295),
    CONSTRAINT stored_emails_content_availability_known
        CHECK (content_availability IN ('Available', 'ExceededSizeLimit', 'NotFetched'))
);

-- The occurrence index orders a binding's mail by UID, which is what the
-- forward pass and the never-observed half of a reconciliation window read.
CREATE INDEX ix_stored_emails_folder_uid ON stored_emails (mail_folder_id, uid_validity, uid);

-- email_message_contents holds the raw MIME of an occurrence whose content
-- was fetched, keyed by the stored email's own id. lz4 rather than the
-- default pglz: compressing MIME with pglz costs far more CPU than the space
-- it saves.
CREATE TABLE email_message_contents (
    stored_email_id uuid        PRIMARY KEY REFERENCES stored_emails (id) ON DELETE CASCADE,
    raw_mime        bytea       COMPRESSION lz4 NOT NULL,
    byte_length     bigint      NOT NULL,
    sha256          bytea       NOT NULL,
    stored_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT email_message_contents_sha256_length CHECK (octet_length(sha256) = 32),
    CONSTRAINT email_message_contents_byte_length CHECK (byte_length = octet_length(raw_mime))
);

-- synchronization_checkpoints is the forward pass's durable progress for
-- one binding, in one UIDVALIDITY scope. A binding without a row has never
-- been synchronized; a row under another UIDVALIDITY is reset, not mixed.
CREATE TABLE synchronization_checkpoints (
    mail_folder_id   bigint      PRIMARY KEY REFERENCES mail_folders (id) ON DELETE CASCADE,
    uid_validity     bigint      NOT NULL,
    last_seen_uid    bigint      NOT NULL DEFAULT 0,
    highest_modseq   bigint,
    synchronized_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT synchronization_checkpoints_uid_validity_range CHECK (uid_validity BETWEEN 1 AND 4294967295),
    CONSTRAINT synchronization_checkpoints_last_seen_uid_range CHECK (last_seen_uid BETWEEN 0 AND 4294967295)
);
