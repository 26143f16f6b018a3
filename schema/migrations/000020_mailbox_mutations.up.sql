-- mailbox_mutations: one change MailFathom was asked to make to a mailbox
-- (relocate, copy, delete, mark read, mark unread one stored email),
-- written before the first IMAP command goes out and advanced as the
-- commands are answered, so a change interrupted anywhere is carried on
-- from the stage it names rather than guessed at.
--
-- It holds no mail: folder ids, UIDs, the mutation's name, who asked and a
-- five-digit failure code. It is removed with the email it describes
-- (including when the change was that email's deletion and the account
-- erases local copies) and with the folders it names.
CREATE TABLE mailbox_mutations (
    id                         uuid        PRIMARY KEY,
    mailbox_account_id         bigint      NOT NULL REFERENCES mailbox_accounts (id) ON DELETE CASCADE,
    stored_email_id            uuid        NOT NULL REFERENCES stored_emails (id) ON DELETE CASCADE,
    -- The source occurrence, as it was when the change was recorded. A
    -- relocation carries the stored email onto another occurrence; this
    -- keeps naming the one the commands were issued against.
    source_mail_folder_id      bigint      NOT NULL REFERENCES mail_folders (id) ON DELETE CASCADE,
    source_uid_validity        bigint      NOT NULL,
    source_uid                 bigint      NOT NULL,
    mutation                   text        NOT NULL,
    destination_mail_folder_id bigint      REFERENCES mail_folders (id) ON DELETE CASCADE,
    -- Who asked: one invocation (its request id), or a rule and the
    -- revision of it that matched (nothing records those yet).
    request_id                 text,
    rule_name                  text,
    rule_revision              integer,
    state                      text        NOT NULL DEFAULT 'Pending',
    stage                      text        NOT NULL DEFAULT 'Recorded',
    -- Which sequence carried a placement: 'Move' or 'Fallback' (COPY,
    -- STORE \Deleted, UID EXPUNGE). Resumption reads it from here, never
    -- from what the server advertises now.
    placement_path             text,
    attempts                   integer     NOT NULL DEFAULT 0,
    failure_code               text,
    -- The placement the server named in its COPYUID answer, if it named one.
    placed_uid_validity        bigint,
    placed_uid                 bigint,
    placement_issued_at        timestamptz,
    -- When synchronization met the placed occurrence (the join) and saw
    -- the source occurrence leave its folder.
    placement_observed_at      timestamptz,
    source_left_observed_at    timestamptz,
    completed_at               timestamptz,
    recorded_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mailbox_mutations_mutation_known
        CHECK (mutation IN ('Relocate', 'Copy', 'Delete', 'MarkRead', 'MarkUnread')),
    CONSTRAINT mailbox_mutations_destination_iff_placement
        CHECK ((mutation IN ('Relocate', 'Copy')) = (destination_mail_folder_id IS NOT NULL)),
    CONSTRAINT mailbox_mutations_relocation_elsewhere
        CHECK (mutation <> 'Relocate' OR destination_mail_folder_id <> source_mail_folder_id),
    CONSTRAINT mailbox_mutations_one_requester
        CHECK ((request_id IS NOT NULL AND rule_name IS NULL AND rule_revision IS NULL)
            OR (request_id IS NULL AND rule_name IS NOT NULL AND rule_revision IS NOT NULL)),
    CONSTRAINT mailbox_mutations_request_id_not_blank CHECK (btrim(request_id) <> ''),
    CONSTRAINT mailbox_mutations_state_known
        CHECK (state IN ('Pending', 'Converging', 'Completed', 'DeadLettered')),
    CONSTRAINT mailbox_mutations_stage_known
        CHECK (stage IN ('Recorded', 'PlacementIssued', 'Copied', 'Flagged', 'Completed')),
    CONSTRAINT mailbox_mutations_placement_path_known
        CHECK (placement_path IN ('Move', 'Fallback')),
    CONSTRAINT mailbox_mutations_failure_code_five_digits CHECK (failure_code ~ '^[0-9]{5}$'),
    CONSTRAINT mailbox_mutations_source_uid_validity_range CHECK (source_uid_validity BETWEEN 1 AND 4294967295),
    CONSTRAINT mailbox_mutations_source_uid_range CHECK (source_uid BETWEEN 1 AND 4294967295),
    CONSTRAINT mailbox_mutations_placed_together
        CHECK ((placed_uid_validity IS NULL) = (placed_uid IS NULL))
);

-- The identity of a change: the occurrence, the mutation (with its
-- destination) and who asked. Two callers asking for the same change at
-- the same moment both reach this index, and it refuses one of them.
CREATE UNIQUE INDEX ux_mailbox_mutations_identity
    ON mailbox_mutations (source_mail_folder_id, source_uid_validity, source_uid, mutation,
                          destination_mail_folder_id, request_id, rule_name, rule_revision)
    NULLS NOT DISTINCT;

-- One invocation asks for one change: a request id names it for good.
CREATE UNIQUE INDEX ux_mailbox_mutations_request_id
    ON mailbox_mutations (request_id) WHERE request_id IS NOT NULL;

-- An account's unfinished changes, oldest first: what every account run
-- converges before it touches a folder.
CREATE INDEX ix_mailbox_mutations_unfinished
    ON mailbox_mutations (mailbox_account_id, recorded_at, id)
    WHERE state IN ('Pending', 'Converging');

-- The forward pass's join: a discovered occurrence against the placements
-- the server named for its folder and UID space.
CREATE INDEX ix_mailbox_mutations_placed
    ON mailbox_mutations (destination_mail_folder_id, placed_uid_validity, placed_uid)
    WHERE placed_uid IS NOT NULL;

-- Reconciliation's match: a disappearance against the source the record
-- names. The identity index leads with the same columns and serves it.
