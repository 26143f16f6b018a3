DROP TABLE passage_refusals;
