"""Typed HTTP client of the GPU Commons API (used by the CLI, the dashboard's tests and e2e tests).

It sends the server's own request models and returns its response models; an error response
becomes the same `api.errors` exception class the server raised.
"""

from gpucommons.client.http import CommonsClient, ServerUnreachable

__all__ = ["CommonsClient", "ServerUnreachable"]
