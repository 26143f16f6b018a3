DROP TABLE mailbox_mutations;
