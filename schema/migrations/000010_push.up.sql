-- Push synchronization's durable state, per account and folder alias.
--
-- change_reported_at is set when the mail server reported a change in the
-- folder while its pass was already running (folder passes are unique
-- while running, so no second one can be queued): the running pass reads
-- and clears it before it completes and goes around once more, so a
-- change that arrived mid-pass is never missed. A pass that starts clears
-- it too, since it is about to read the folder anyway.
--
-- effective_mode is how the folder is synchronized right now (Push or
-- Polling), so the line saying so is written only when it changes, across
-- watches and processes.
ALTER TABLE folder_states
    ADD COLUMN change_reported_at timestamptz,
    ADD COLUMN effective_mode     text,
    ADD CONSTRAINT folder_states_effective_mode CHECK (effective_mode IN ('Push', 'Polling'));
