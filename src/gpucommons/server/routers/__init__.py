"""Thin HTTP wrappers over `server.services`: parse, authorize, call one service, convert."""
