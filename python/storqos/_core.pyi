"""Type stubs of the compiled core (crates/storqos-py)."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str
MAX_TENANTS: int
MAX_OUTSTANDING: int
MAX_SERVERS: int
# The gateway's limits (crates/storqos-py/src/registry.rs).
GATEWAY_MAX_DEPTH: int
GATEWAY_MAX_NAME_BYTES: int
GATEWAY_MAX_IO_BYTES: int
GATEWAY_MAX_FAULT_DELAY_S: float

def policy_registry() -> str: ...

def simulate(
    arrival_ns: npt.NDArray[np.uint64],
    tenant: npt.NDArray[np.uint32],
    size: npt.NDArray[np.uint32],
    offset: npt.NDArray[np.uint64],
    is_read: npt.NDArray[np.bool_],
    target: npt.NDArray[np.uint8] | None,
    policy_json: str,
    device_json: str,
    closed_json: str = "[]",
    generators_json: str = "[]",
    seed: int = 1,
    window_ns: int = 1_000_000_000,
    keep_requests: bool = False,
    until_ns: int | None = None,
) -> dict[str, Any]: ...
def generate(generators_json: str) -> dict[str, npt.NDArray[Any]]: ...
def check_policy(policy_json: str) -> str: ...
def check_device(device_json: str) -> str: ...
def allocate(
    capacities: list[float],
    fractions: list[list[float]],
    policy: str,
    weights: list[float] | None = None,
) -> dict[str, Any]: ...
def baa_scenario(
    hdd_iops: float,
    ssd_iops: float,
    hit_phases: list[list[tuple[int, float]]],
    policy: str,
    window_ns: int,
    period_ns: int,
    duration_ns: int,
    sample_ns: int,
    outstanding: int = 64,
    depth: int = 64,
    seed: int = 1,
    initial_allocation: bool = True,
    alarm_threshold: float | None = None,
    alarm_check_ns: int | None = None,
) -> dict[str, Any]: ...
def capacity_table(
    arrival_ns: npt.NDArray[np.uint64], deadlines_ns: list[int], fractions: list[float], method: str = "fast",
    fcfs: bool = False,
) -> dict[str, Any]: ...
def rtt_classify(arrival_ns: npt.NDArray[np.uint64], capacity_iops: float, deadline_ns: int) -> npt.NDArray[np.bool_]: ...
def rtd_plan(arrival_ns: npt.NDArray[np.uint64], fractions: list[float], deadlines_ns: list[int]) -> dict[str, Any]: ...
def power_estimate(
    capacity_iops: float,
    requests: int,
    span_ns: int,
    pool_iops: float = 200.0,
    disks_per_pool: int = 4,
    total_pools: int | None = None,
    active_w: float = 13.5,
    idle_w: float = 10.2,
    sleep_w: float = 0.0,
) -> dict[str, Any]: ...
def fclb_admit(
    workloads_json: str,
    device_json: str,
    backend_json: str,
    curve_rates: list[float] = ...,
    duration_ns: int = 60_000_000_000,
    seed: int = 1,
    span_bytes: int | None = None,
) -> dict[str, Any]: ...
def fclb_tune(
    mix_json: str,
    device_json: str,
    backend_json: str,
    operating_iops: float,
    pole: float,
    duration_ns: int = 60_000_000_000,
    seed: int = 1,
    span_bytes: int | None = None,
) -> dict[str, Any]: ...
def fclb_check_gain(gain_iops_per_ms: float, plant_gain_ms_per_iops: float) -> float: ...
def fclb_experiment(cases: list[str], policies: list[str], pole: float | None = None, seed: int = 1) -> dict[str, Any]: ...
def serve(
    config_json: str,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    on_window: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None] | None = None,
    on_reload: Callable[[], str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run the NBD QoS gateway (crates/storqos-gateway) until duration_s, SIGTERM, Ctrl-C
    or ``stop()`` returning true (polled every 0.1 s).

    ``on_ready(info)`` is called once it listens (``info["listen"]`` is the bound
    address). Returns the per-tenant statistics. Bad configuration: ``ValueError``.
    """
    ...


def check_gateway(config_json: str) -> dict[str, Any]:
    """Check a gateway configuration as ``serve`` would before listening (fields, export
    files, policy); return what it would serve (``listen`` as given, not bound).
    Bad configuration: ``storqos.base.errors.GatewayConfigError``."""
    ...


class LivePath:
    """A device profile's live path (``storqos_core::sim::live_path``), its hold shares
    fitted: built from :meth:`storqos.model.device_profile.DeviceProfile.live_path`."""

    def __init__(self, spec: dict[str, Any]) -> None: ...
    @property
    def has_bursts(self) -> bool: ...
    def hold(self, read: bool) -> float: ...
    def apply(
        self,
        arrival_ns: npt.NDArray[np.int64],
        finish_ns: npt.NDArray[np.int64],
        response_ns: npt.NDArray[np.int64],
        wait_ns: npt.NDArray[np.int64],
        is_read: npt.NDArray[np.bool_],
        tenant: npt.NDArray[np.uint32] | None = None,
        offset: npt.NDArray[np.uint64] | None = None,
        size: npt.NDArray[np.uint64] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(issue, response, reply, wait left) in ns of requests given in arrival order."""
        ...
