"""Live storage: the NBD gateway (its config, process and control client, the digital
twin of a running one), replay of traces against NBD exports, calibration of a device
profile, and validation of the simulator against the gateway. The top layer but the
command line."""

from __future__ import annotations

from storqos.base.lazy import submodules

__getattr__ = submodules(__name__)
