-- What a provider's limits left of each account: when a server last
-- asked it to wait, and what it downloaded in the last day. Neither is
-- mail: account keys, fixed reason words, times and byte counts.

-- account_throttles: the last throttling answer an account's server gave
-- (a BYE or NO saying the account exceeded a limit, or a subsystem is
-- down). The account's work waits until throttled_until: every account
-- run, folder pass and reconciliation window of the account, on every
-- replica, snoozes until then instead of asking the server. reason is a
-- fixed word (Unavailable, BandwidthExceeded, ...); suggested_delay_ms the
-- wait the server suggested, NULL when it suggested none (the account then
-- waits its run backoff for consecutive throttles in a row, which a folder
-- pass that completes resets to 0). A throttled answer is not a failure:
-- account_states.consecutive_failures does not count it.
CREATE TABLE account_throttles (
    account_key        text        PRIMARY KEY,
    throttled_until    timestamptz NOT NULL,
    reason             text        NOT NULL,
    suggested_delay_ms bigint,
    consecutive        integer     NOT NULL,
    throttled_at       timestamptz NOT NULL
);

-- account_throttle_counts: how many throttling answers each account got,
-- by reason, since the database was created: the counter
-- mailfathom_account_throttled_total reads, the same on every replica.
CREATE TABLE account_throttle_counts (
    account_key text   NOT NULL,
    reason      text   NOT NULL,
    throttled   bigint NOT NULL,
    PRIMARY KEY (account_key, reason)
);

-- account_downloads: the message content an account's forward passes
-- downloaded, in bytes, per hour (UTC) it was recorded in. The daily
-- download budget (MAILFATHOM_ACCOUNTS_<i>_MAX_DOWNLOAD_BYTES_PER_DAY) is
-- a rolling 24-hour window over these rows: an hour's bytes count until
-- 25 hours after the hour began, so they always count for at least 24
-- hours after they were downloaded. A pass claims its allowance before it
-- downloads (added to the hour it starts in) and settles it when it ends
-- (the claim taken back, what it downloaded added to the hour it ends
-- in), so passes running at once on several replicas never share out more
-- than the budget; a pass that never settled — its process died — keeps
-- its whole claim counted, which errs on the side of the provider. Rows
-- older than the window are deleted as new ones are written.
CREATE TABLE account_downloads (
    account_key text        NOT NULL,
    hour        timestamptz NOT NULL,
    bytes       bigint      NOT NULL,
    PRIMARY KEY (account_key, hour)
);

-- account_download_states: one row per account with a budget, locked by
-- every claim so claims of one account are made one at a time. paused_until
-- is when a pass that stopped at the budget continues — when enough of the
-- window has expired for needed_bytes, the declared size of the first
-- message it left — NULL when none stopped.
CREATE TABLE account_download_states (
    account_key  text        PRIMARY KEY,
    paused_until timestamptz,
    needed_bytes bigint      NOT NULL DEFAULT 0
);

-- run_throttled: the account's current run was throttled before it
-- scheduled anything, and waits as a snoozed job to begin again. The run
-- that begins then does not settle it: a throttled run neither failed
-- (consecutive_failures does not grow) nor succeeded (nor is it reset).
ALTER TABLE account_states ADD COLUMN run_throttled boolean NOT NULL DEFAULT false;

-- examined_uid_next: the UIDNEXT the latest forward pass of the alias
-- found when it examined the folder, whether or not it walked the folder
-- to its end, so status can say how far a first synchronization has got
-- (its checkpoint against this). NULL before the first pass.
ALTER TABLE folder_states ADD COLUMN examined_uid_next bigint;
