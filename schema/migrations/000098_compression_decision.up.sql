-- What the last forward pass of each folder alias decided about
-- COMPRESS=DEFLATE on its content connection, and why (a fixed phrase such
-- as "the server is on a loopback address"), for the status view: with
-- MAILFATHOM_ACCOUNTS_<i>_COMPRESSION=auto the answer depends on where the
-- server turned out to be. NULL before the first pass that opened a
-- content connection.
ALTER TABLE folder_states
    ADD COLUMN compression_in_use boolean,
    ADD COLUMN compression_reason text;
