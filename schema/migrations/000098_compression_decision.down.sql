ALTER TABLE folder_states
    DROP COLUMN compression_in_use,
    DROP COLUMN compression_reason;
