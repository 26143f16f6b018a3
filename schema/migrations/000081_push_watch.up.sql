-- What a push account's watch compares and follows.
--
-- observed_*: the folder as the last completed forward pass of the alias
-- found it when it examined it (UIDVALIDITY, UIDNEXT, message count,
-- HIGHESTMODSEQ), and the binding it examined, written in the transaction
-- that completes the pass. A watching session that starts compares what
-- its own EXAMINE (or its subscription's STATUS) reports with it and
-- queues a pass only when they differ: the folder may have changed while
-- nothing watched it. A HIGHESTMODSEQ is at most 64 bits unsigned, hence
-- numeric.
--
-- resolved_binding_id and resolution_failure: what the account's latest
-- run resolved the alias to — the binding it committed, or the identity of
-- why it resolved to no folder — so the watch watches only what the latest
-- run resolved, and status says why an alias is not watched. Both NULL:
-- no run has recorded the alias yet.
ALTER TABLE folder_states
    ADD COLUMN observed_binding_id      bigint,
    ADD COLUMN observed_uid_validity    bigint,
    ADD COLUMN observed_uid_next        bigint,
    ADD COLUMN observed_exists          bigint,
    ADD COLUMN observed_highest_modseq  numeric(20, 0),
    ADD COLUMN resolved_binding_id      bigint,
    ADD COLUMN resolution_failure       text;

-- resolutions_version counts the runs whose resolutions differed from the
-- previous run's: a watch polls it, for every account of a process in one
-- statement, to learn that the folders it watches changed. 0: no run has
-- recorded resolutions yet.
--
-- push_subscription_retry_at is when a mail server that declined a push
-- subscription, or advertised no NOTIFY, is asked for one again. It
-- outlives the watch's attempt, which re-arms hourly, and the process.
ALTER TABLE account_states
    ADD COLUMN resolutions_version        bigint NOT NULL DEFAULT 0,
    ADD COLUMN push_subscription_retry_at timestamptz;
