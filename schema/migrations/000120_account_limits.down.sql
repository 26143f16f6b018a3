ALTER TABLE account_states DROP COLUMN run_throttled;
ALTER TABLE folder_states DROP COLUMN examined_uid_next;
DROP TABLE account_download_states;
DROP TABLE account_downloads;
DROP TABLE account_throttle_counts;
DROP TABLE account_throttles;
