-- What synchronization knows about each account and folder alias between
-- runs: the state the run backoff is computed from, the outcome an
-- operator asks about first, and cumulative counts. None of it is mail.

-- account_states: one row per account that has run. A run counts as
-- failed when the account run itself or any of its folders' passes or
-- windows failed; consecutive_failures counts the failed runs before the
-- current one, which is what the wait before the next run grows with.
CREATE TABLE account_states (
    account_key           text        PRIMARY KEY,
    consecutive_failures  integer     NOT NULL DEFAULT 0,
    run_started_at        timestamptz,
    run_failed            boolean     NOT NULL DEFAULT false,
    last_failure_at       timestamptz,
    last_failure_identity text
);

-- folder_states: one row per account and folder alias (across its
-- binding generations). The counts are cumulative over every pass.
CREATE TABLE folder_states (
    account_key           text        NOT NULL,
    alias                 text        NOT NULL,
    stored                bigint      NOT NULL DEFAULT 0,
    oversized             bigint      NOT NULL DEFAULT 0,
    unreadable            bigint      NOT NULL DEFAULT 0,
    excluded_by_date      bigint      NOT NULL DEFAULT 0,
    expunged_before_fetch bigint      NOT NULL DEFAULT 0,
    content_withheld      bigint      NOT NULL DEFAULT 0,
    last_pass_at          timestamptz,
    last_success_at       timestamptz,
    last_failure_at       timestamptz,
    last_failure_identity text,
    PRIMARY KEY (account_key, alias)
);
