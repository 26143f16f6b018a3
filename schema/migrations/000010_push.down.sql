ALTER TABLE folder_states
    DROP CONSTRAINT folder_states_effective_mode,
    DROP COLUMN effective_mode,
    DROP COLUMN change_reported_at;
