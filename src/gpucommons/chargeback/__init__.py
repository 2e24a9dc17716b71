"""chargeback."""
