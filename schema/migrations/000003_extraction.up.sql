-- MIME extraction: what the reader found in each stored message, and the
-- lexical search documents built from it.

-- The extraction outcome on the occurrence itself. mime_readable is NULL
-- until a reader has looked at the message (never, for one stored without
-- content), false when no reader could (mime_failure names why).
ALTER TABLE stored_emails
    ADD COLUMN mime_readable            boolean,
    ADD COLUMN mime_failure             text,
    ADD COLUMN received_at              timestamptz,
    ADD COLUMN in_reply_to              text[] NOT NULL DEFAULT '{}',
    ADD COLUMN thread_references        text[] NOT NULL DEFAULT '{}',
    ADD COLUMN attachment_count         integer NOT NULL DEFAULT 0,
    ADD COLUMN attachment_decoded_bytes bigint  NOT NULL DEFAULT 0,
    ADD COLUMN inline_resource_count    integer NOT NULL DEFAULT 0,
    ADD COLUMN has_encrypted_content    boolean NOT NULL DEFAULT false,
    ADD COLUMN has_unverified_signature boolean NOT NULL DEFAULT false,
    ADD COLUMN has_tnef                 boolean NOT NULL DEFAULT false,
    ADD COLUMN extracted_at             timestamptz;

-- A mail client's queries: a conversation by its identifiers, a mailbox by
-- date, mail with attachments.
CREATE INDEX ix_stored_emails_message_id ON stored_emails (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX ix_stored_emails_references ON stored_emails USING gin (thread_references);
CREATE INDEX ix_stored_emails_account_sent ON stored_emails (mailbox_account_id, sent_at DESC);
CREATE INDEX ix_stored_emails_with_attachments ON stored_emails (mailbox_account_id, sent_at DESC) WHERE attachment_count > 0;

-- email_participants is one address of one message in one role. comparison
-- is the upper-cased form that is the address's identity; address is what
-- the message wrote.
CREATE TABLE email_participants (
    stored_email_id uuid     NOT NULL REFERENCES stored_emails (id) ON DELETE CASCADE,
    position        smallint NOT NULL,
    role            text     NOT NULL,
    address         text     NOT NULL,
    comparison      text     NOT NULL,
    display_name    text,
    PRIMARY KEY (stored_email_id, position),
    CONSTRAINT email_participants_role_known CHECK (role IN ('Sender', 'From', 'ReplyTo', 'To', 'Cc', 'Bcc'))
);
CREATE INDEX ix_email_participants_comparison ON email_participants (comparison, role);

-- email_attachments is one part the attachment rules classified as an
-- attachment. The file name is untrusted input, stored sanitized.
CREATE TABLE email_attachments (
    stored_email_id    uuid     NOT NULL REFERENCES stored_emails (id) ON DELETE CASCADE,
    position           smallint NOT NULL,
    media_type         text     NOT NULL,
    disposition        text,
    file_name          text,
    file_name_repaired boolean  NOT NULL DEFAULT false,
    decoded_bytes      bigint   NOT NULL,
    tnef_unexpanded    boolean  NOT NULL DEFAULT false,
    PRIMARY KEY (stored_email_id, position)
);

-- email_search_documents is the searchable text of one message: the body
-- text (trimmed of quoted history and signatures, the untrimmed reading kept
-- beside it), bounded copies of the subject and participant addresses, and
-- a stored generated tsvector over them. The text search configuration is
-- compiled into the column; `mailfathom reindex-search` changes it. The
-- text columns use lz4 like raw MIME: pglz cost about a quarter of the
-- server's CPU during a first synchronization.
CREATE TABLE email_search_documents (
    stored_email_id     uuid        PRIMARY KEY REFERENCES stored_emails (id) ON DELETE CASCADE,
    text_source         text        NOT NULL,
    lossy               boolean     NOT NULL DEFAULT false,
    truncated           boolean     NOT NULL DEFAULT false,
    subject             text COMPRESSION lz4,
    participants        text COMPRESSION lz4,
    body_text           text COMPRESSION lz4,
    body_text_untrimmed text COMPRESSION lz4,
    created_at          timestamptz NOT NULL DEFAULT now(),
    search_vector       tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple'::regconfig, coalesce(subject, '')), 'A') ||
        setweight(to_tsvector('simple'::regconfig, coalesce(participants, '')), 'B') ||
        to_tsvector('simple'::regconfig, coalesce(body_text, ''))) STORED,
    CONSTRAINT email_search_documents_text_source_known
        CHECK (text_source IN ('PlainText', 'HtmlDerived', 'Encrypted', 'NoTextualBody', 'NotExtracted'))
);
CREATE INDEX ix_email_search_documents_vector ON email_search_documents USING gin (search_vector);

-- The extraction backfill's committed position: the last stored email (ids
-- are UUIDv7, so they order by creation) a batch read.
CREATE TABLE extraction_backfill_positions (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    last_stored_email_id uuid    NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
