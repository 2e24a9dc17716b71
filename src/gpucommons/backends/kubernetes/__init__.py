"""kubernetes."""
