DROP TABLE folder_states;
DROP TABLE account_states;
