"""Type stubs of the compiled core (crates/storqos-py)."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

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
def lindley_fcfs(arrival_ns: npt.NDArray[np.uint64], service_ns: int) -> npt.NDArray[np.uint64]: ...
def lindley_fcfs_summary(arrival_ns: npt.NDArray[np.uint64], service_ns: int, window_ns: int) -> tuple[float, int, int]: ...
def check_policy(policy_json: str) -> str: ...
def check_device(device_json: str) -> str: ...
