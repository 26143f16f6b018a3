DROP TABLE vector_backlog;
