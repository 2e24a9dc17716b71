"""SCIM 2.0 service provider (RFC 7643/7644) at /scim/v2, on scim2-models: `mount_scim(app)`."""

from gpucommons.server.scim.app import SCIM_PREFIX, build_scim_app, mount_scim

__all__ = ["SCIM_PREFIX", "build_scim_app", "mount_scim"]
