ALTER TABLE account_states
    DROP COLUMN push_subscription_retry_at,
    DROP COLUMN resolutions_version;

ALTER TABLE folder_states
    DROP COLUMN resolution_failure,
    DROP COLUMN resolved_binding_id,
    DROP COLUMN observed_highest_modseq,
    DROP COLUMN observed_exists,
    DROP COLUMN observed_uid_next,
    DROP COLUMN observed_uid_validity,
    DROP COLUMN observed_binding_id;
