"""Background work of the server: the scheduler loop and crash recovery."""
