"""GPU Commons: share one GPU cluster between many ML teams, fairly and with clear bills."""

__version__ = "0.1.0"
