"""Type stubs of the compiled core (crates/storqos-py)."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str
MAX_TENANTS: int
MAX_OUTSTANDING: int
MAX_SERVERS: int
# A cluster's bounds (crates/storqos-core/src/sim/cluster.rs).
MAX_CLUSTER_SERVERS: int
MAX_REPLICAS: int
# The gateway's limits (crates/storqos-py/src/registry.rs).
GATEWAY_MAX_DEPTH: int
GATEWAY_MAX_NAME_BYTES: int
GATEWAY_MAX_IO_BYTES: int
GATEWAY_MAX_FAULT_DELAY_S: float

def policy_registry() -> str: ...

class GroupSummaries:
    """Per-group (tenant, class or whole-run) summaries of the groups that completed requests,
    numpy columns of one length."""

    @property
    def id(self) -> npt.NDArray[np.uint32]: ...
    @property
    def completed(self) -> npt.NDArray[np.uint64]: ...
    @property
    def bytes(self) -> npt.NDArray[np.uint64]: ...
    @property
    def mean_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def mean_wait_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def p50_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p90_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p95_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p99_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p999_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def max_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def span_s(self) -> npt.NDArray[np.float64]: ...


class ResponseCdf:
    """Response-time CDF points per tenant."""

    @property
    def tenant(self) -> npt.NDArray[np.uint32]: ...
    @property
    def response_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def fraction(self) -> npt.NDArray[np.float64]: ...


class SimWindows:
    """The per-window, per-tenant series of a simulated run."""

    @property
    def start_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def tenant(self) -> npt.NDArray[np.uint32]: ...
    @property
    def arrivals(self) -> npt.NDArray[np.uint64]: ...
    @property
    def completed(self) -> npt.NDArray[np.uint64]: ...
    @property
    def bytes(self) -> npt.NDArray[np.uint64]: ...
    @property
    def mean_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def p50_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p95_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p99_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def max_ns(self) -> npt.NDArray[np.uint64]: ...


class GaugeSamples:
    """The policy's gauges per window; sample ``i`` is gauge ``names[name_id[i]]``."""

    @property
    def start_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def name_id(self) -> npt.NDArray[np.uint32]: ...
    @property
    def names(self) -> list[str]: ...
    @property
    def value(self) -> npt.NDArray[np.float64]: ...


class RequestRecords:
    """Every completed request of a run that kept them (``class_``: the scheduling class)."""

    @property
    def id(self) -> npt.NDArray[np.uint64]: ...
    @property
    def tenant(self) -> npt.NDArray[np.uint32]: ...
    @property
    def class_(self) -> npt.NDArray[np.uint32]: ...
    @property
    def arrival_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def dispatch_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def finish_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def target(self) -> npt.NDArray[np.uint8]: ...
    @property
    def size(self) -> npt.NDArray[np.uint32]: ...
    @property
    def is_read(self) -> npt.NDArray[np.bool_]: ...


class SimOutput:
    """Everything one simulation produced."""

    @property
    def tenants(self) -> GroupSummaries: ...
    @property
    def classes(self) -> GroupSummaries: ...
    @property
    def total(self) -> GroupSummaries: ...
    @property
    def cdf(self) -> ResponseCdf: ...
    @property
    def windows(self) -> SimWindows: ...
    @property
    def gauges(self) -> GaugeSamples: ...
    @property
    def requests(self) -> RequestRecords | None: ...
    @property
    def arrived(self) -> int: ...
    @property
    def unfinished(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def rejected(self) -> list[int]: ...


class ServerSummaries:
    """What each server of a cluster run served, one row per server."""

    @property
    def server(self) -> npt.NDArray[np.uint32]: ...
    @property
    def completed(self) -> npt.NDArray[np.uint64]: ...
    @property
    def bytes(self) -> npt.NDArray[np.uint64]: ...
    @property
    def mean_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def p50_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def p99_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def max_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def by_reservation(self) -> npt.NDArray[np.uint64]: ...
    @property
    def unfinished(self) -> npt.NDArray[np.uint64]: ...


class ClusterOutput:
    """Everything one cluster simulation produced."""

    @property
    def tenants(self) -> GroupSummaries: ...
    @property
    def total(self) -> GroupSummaries: ...
    @property
    def cdf(self) -> ResponseCdf: ...
    @property
    def windows(self) -> SimWindows: ...
    @property
    def servers(self) -> ServerSummaries: ...
    @property
    def arrived(self) -> int: ...
    @property
    def unfinished(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def events(self) -> int: ...


class GeneratedRequests:
    """Generated requests in arrival order, numpy columns of one length."""

    @property
    def arrival_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def is_read(self) -> npt.NDArray[np.bool_]: ...
    @property
    def offset(self) -> npt.NDArray[np.uint64]: ...
    @property
    def size(self) -> npt.NDArray[np.uint32]: ...
    @property
    def tenant(self) -> npt.NDArray[np.uint32]: ...


class Allocation:
    """Device throughput allocated among backlogged clients by one policy (per client, per device)."""

    @property
    def policy(self) -> str: ...
    @property
    def total(self) -> float: ...
    @property
    def fair_share(self) -> list[float]: ...
    @property
    def bottleneck(self) -> list[int]: ...
    @property
    def throughput(self) -> list[float]: ...
    @property
    def per_device(self) -> list[list[float]]: ...
    @property
    def device_iops(self) -> list[float]: ...
    @property
    def utilisation(self) -> list[float]: ...
    @property
    def amplification(self) -> list[float | None]: ...


class TieredSeries:
    """The tiered (SSD + HDD) scenario's samples."""

    @property
    def start_ns(self) -> list[int]: ...
    @property
    def throughput(self) -> list[list[float]]: ...
    @property
    def hdd_utilisation(self) -> list[float]: ...
    @property
    def ssd_utilisation(self) -> list[float]: ...
    @property
    def recomputations(self) -> int: ...


class CapacityTable:
    """Cmin(f, δ) (IOPS; one row per deadline, one column per fraction) and the search's cost;
    the ``fcfs_*`` fields with ``fcfs`` only."""

    @property
    def cmin_iops(self) -> list[list[float]]: ...
    @property
    def needed(self) -> list[int]: ...
    @property
    def requests(self) -> int: ...
    @property
    def passes(self) -> int: ...
    @property
    def probes(self) -> int: ...
    @property
    def closed_form_sweeps(self) -> int: ...
    @property
    def sample_requests(self) -> int: ...
    @property
    def sample_probes(self) -> int: ...
    @property
    def lane_steps(self) -> int: ...
    @property
    def fcfs_iops(self) -> list[list[float]] | None: ...
    @property
    def fcfs_probes(self) -> int | None: ...
    @property
    def fcfs_steps(self) -> int | None: ...


class RtdPlan:
    """A recursive RTD decomposition: per tier its capacity (0: needed nothing) and admitted
    requests, per request its tier."""

    @property
    def capacity_iops(self) -> list[float]: ...
    @property
    def admitted(self) -> list[int]: ...
    @property
    def tier(self) -> npt.NDArray[np.uint32]: ...


class PowerEstimate:
    """The power of provisioning a capacity with pools of disks."""

    @property
    def capacity_iops(self) -> float: ...
    @property
    def on_pools(self) -> int: ...
    @property
    def on_disks(self) -> int: ...
    @property
    def busy_disk_s(self) -> float: ...
    @property
    def span_s(self) -> float: ...
    @property
    def energy_j(self) -> float: ...
    @property
    def power_w(self) -> float: ...


class ProfileCurve:
    """Profiled points of the storage's IOPS → p95 curve."""

    @property
    def offered_iops(self) -> list[float]: ...
    @property
    def achieved_iops(self) -> list[float]: ...
    @property
    def p95_ns(self) -> list[int]: ...
    @property
    def mean_ns(self) -> list[float]: ...
    @property
    def p95_by_workload_ns(self) -> list[list[int]]: ...


class AdmissionRows:
    """The admission report's rows, one per workload."""

    @property
    def name(self) -> list[str]: ...
    @property
    def iops(self) -> list[float]: ...
    @property
    def rt_ns(self) -> list[int]: ...
    @property
    def rt_measured_ns(self) -> list[int]: ...
    @property
    def rt_target_ns(self) -> list[int]: ...
    @property
    def reference_ns(self) -> list[int]: ...
    @property
    def ok(self) -> list[bool]: ...


class Admission:
    """Seed 003 admission control of a mix of workloads."""

    @property
    def target_iops(self) -> float: ...
    @property
    def achieved_iops(self) -> float: ...
    @property
    def admitted(self) -> bool: ...
    @property
    def stable_limit_iops(self) -> float | None: ...
    @property
    def rows(self) -> AdmissionRows: ...
    @property
    def curve(self) -> ProfileCurve: ...


class Tuning:
    """Seed 003 tuning: the plant gain G, the controller gain K, the bound 2/G, the probes."""

    @property
    def plant_gain_ms_per_iops(self) -> float: ...
    @property
    def pole(self) -> float: ...
    @property
    def gain_iops_per_ms(self) -> float: ...
    @property
    def bound_iops_per_ms(self) -> float: ...
    @property
    def operating_iops(self) -> float: ...
    @property
    def rt0_ms(self) -> float: ...
    @property
    def probes(self) -> ProfileCurve: ...


class ExperimentSetup:
    """The seed 003 experiments' derived setup."""

    @property
    def gain_iops_per_ms(self) -> float: ...
    @property
    def plant_gain_ms_per_iops(self) -> float: ...
    @property
    def pole(self) -> float: ...
    @property
    def bound_iops_per_ms(self) -> float: ...
    @property
    def operating_iops(self) -> float: ...
    @property
    def reference_ns(self) -> list[int]: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def probes(self) -> ProfileCurve: ...


class WorkloadOutcomes:
    """Per workload present in an experiment run."""

    @property
    def workload(self) -> list[int]: ...
    @property
    def completed(self) -> list[int]: ...
    @property
    def throughput_iops(self) -> list[float]: ...
    @property
    def steady_iops(self) -> list[float]: ...
    @property
    def violation_pct(self) -> list[float]: ...
    @property
    def p95_ms(self) -> list[float]: ...
    @property
    def final_rate_iops(self) -> list[float]: ...


class ExperimentRun:
    """One case of the seed 003 experiments under one policy."""

    @property
    def case(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def total_iops(self) -> float: ...
    @property
    def throughput_ratio(self) -> float | None: ...
    @property
    def workloads(self) -> WorkloadOutcomes: ...
    @property
    def windows(self) -> SimWindows: ...
    @property
    def gauges(self) -> GaugeSamples: ...


class Experiment:
    """The seed 003 experiments: their setup and every (case, policy) run."""

    @property
    def setup(self) -> ExperimentSetup: ...
    @property
    def runs(self) -> tuple[ExperimentRun, ...]: ...


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
) -> SimOutput: ...
def simulate_cluster(
    arrival_ns: npt.NDArray[np.uint64],
    tenant: npt.NDArray[np.uint32],
    size: npt.NDArray[np.uint32],
    offset: npt.NDArray[np.uint64],
    is_read: npt.NDArray[np.bool_],
    server: npt.NDArray[np.uint32] | None,
    policy_json: str,
    device_json: str,
    cluster_json: str,
    closed_json: str = "[]",
    generators_json: str = "[]",
    seed: int = 1,
    window_ns: int = 1_000_000_000,
    until_ns: int | None = None,
) -> ClusterOutput: ...
def hash_placement(
    tenant: npt.NDArray[np.uint32],
    offset: npt.NDArray[np.uint64],
    servers: int,
    *,
    object_bytes: int = 4 << 20,
    seed: int = 0,
) -> npt.NDArray[np.uint32]:
    """Each request's primary server under the cluster's hash placement (what
    :func:`simulate_cluster` places with ``{"kind": "hash"}``), for a live replay spread
    over as many gateways."""
    ...


def split_share(total: float, demand: list[float], server: int) -> float: ...
def generate(generators_json: str) -> GeneratedRequests: ...
def check_policy(policy_json: str) -> str: ...
def check_device(device_json: str) -> str: ...
def allocate(
    capacities: list[float],
    fractions: list[list[float]],
    policy: str,
    weights: list[float] | None = None,
) -> Allocation: ...
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
) -> TieredSeries: ...
def capacity_table(
    arrival_ns: npt.NDArray[np.uint64], deadlines_ns: list[int], fractions: list[float], method: str = "fast",
    fcfs: bool = False,
) -> CapacityTable: ...
def rtt_classify(arrival_ns: npt.NDArray[np.uint64], capacity_iops: float, deadline_ns: int) -> npt.NDArray[np.bool_]: ...
def rtd_plan(arrival_ns: npt.NDArray[np.uint64], fractions: list[float], deadlines_ns: list[int]) -> RtdPlan: ...
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
) -> PowerEstimate: ...
def fclb_admit(
    workloads_json: str,
    device_json: str,
    backend_json: str,
    curve_rates: list[float] = ...,
    duration_ns: int = 60_000_000_000,
    seed: int = 1,
    span_bytes: int | None = None,
) -> Admission: ...
def fclb_tune(
    mix_json: str,
    device_json: str,
    backend_json: str,
    operating_iops: float,
    pole: float,
    duration_ns: int = 60_000_000_000,
    seed: int = 1,
    span_bytes: int | None = None,
) -> Tuning: ...
def fclb_check_gain(gain_iops_per_ms: float, plant_gain_ms_per_iops: float) -> float: ...
def fclb_experiment(cases: list[str], policies: list[str], pole: float | None = None, seed: int = 1) -> Experiment: ...
class GatewayExport:
    """One served export as the gateway reports it when ready."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def tenant(self) -> int: ...
    @property
    def class_(self) -> int:
        """The scheduling class (``class`` in the JSON document)."""
        ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def direct(self) -> bool: ...
    @property
    def allow(self) -> list[str]: ...


class GatewayInfo:
    """What the gateway serves, known once it listens (from :func:`check_gateway`: what
    it would serve, ``listen`` as given)."""

    @property
    def listen(self) -> str:
        """The bound address (the real port when port 0 was asked for), or ``unix:/PATH``."""
        ...
    @property
    def tls(self) -> str:
        """``off``, ``on`` or ``require``."""
        ...
    @property
    def policy(self) -> str: ...
    @property
    def depth(self) -> int: ...
    @property
    def iops(self) -> float | None: ...
    @property
    def metrics(self) -> str | None: ...
    @property
    def direct_reads(self) -> str:
        """``threads`` or ``io_uring``."""
        ...
    @property
    def exports(self) -> list[GatewayExport]: ...
    @property
    def warnings(self) -> list[str]: ...
    def to_json(self) -> str:
        """The gateway's JSON document of this information."""
        ...


class TenantStats:
    """The final statistics of one tenant of the gateway."""

    @property
    def tenant(self) -> int: ...
    @property
    def exports(self) -> list[str]: ...
    @property
    def ops(self) -> int: ...
    @property
    def reads(self) -> int: ...
    @property
    def writes(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def flushes(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def rejected(self) -> int: ...
    @property
    def iops(self) -> float: ...
    @property
    def mean_us(self) -> float: ...
    @property
    def p50_us(self) -> float: ...
    @property
    def p99_us(self) -> float: ...
    @property
    def max_us(self) -> float: ...


class WindowRow:
    """One (window, tenant) row of the gateway's per-window series."""

    @property
    def start_s(self) -> float: ...
    @property
    def length_s(self) -> float: ...
    @property
    def tenant(self) -> int: ...
    @property
    def ops(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def iops(self) -> float: ...
    @property
    def mean_us(self) -> float: ...
    @property
    def p50_us(self) -> float: ...
    @property
    def p95_us(self) -> float: ...
    @property
    def p99_us(self) -> float: ...
    @property
    def max_us(self) -> float: ...


class GaugeRow:
    """One gauge of the gateway's policy, sampled at the end of a window."""

    @property
    def start_s(self) -> float: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> float: ...


class GatewayStats:
    """What a gateway run did, returned when it stops."""

    @property
    def policy(self) -> str: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def connections(self) -> int: ...
    @property
    def protocol_errors(self) -> int: ...
    @property
    def tenants(self) -> list[TenantStats]: ...
    @property
    def windows(self) -> list[WindowRow]: ...
    @property
    def gauges(self) -> list[GaugeRow]: ...
    def to_json(self) -> str:
        """The gateway's JSON document of these statistics."""
        ...


def serve(
    config_json: str,
    on_ready: Callable[[GatewayInfo], None] | None = None,
    on_window: Callable[[list[WindowRow], list[GaugeRow]], None] | None = None,
    on_reload: Callable[[], str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> GatewayStats:
    """Run the NBD QoS gateway (crates/storqos-gateway) until duration_s, SIGTERM, Ctrl-C
    or ``stop()`` returning true (polled every 0.1 s).

    ``on_ready(info)`` is called once it listens (``info.listen`` is the bound
    address). Returns the statistics. Bad configuration: ``GatewayConfigError``.
    """
    ...


def check_gateway(config_json: str) -> GatewayInfo:
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


# Local replay (crates/storqos-py/src/local_replay.rs, storqos_gateway::local_replay).


class LocalReplay:
    """What :func:`replay_local` did: per request, in trace order, when it was submitted and
    completed (ns after the common start) and its result."""

    @property
    def issue_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def finish_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def result(self) -> npt.NDArray[np.int64]:
        """Bytes transferred (of the request rounded to 4 KiB with ``direct``) or a negative errno."""
        ...
    @property
    def engine(self) -> str:
        """``"io_uring"``, ``"threads"`` (the kernel refused io_uring) or ``"io_uring+threads"``."""
        ...
    @property
    def late(self) -> int:
        """Requests submitted more than 1 ms after their time."""
        ...
    @property
    def wrapped(self) -> int:
        """Requests whose offset was moved to end inside the file."""
        ...


class SpreadReplay:
    """What :func:`replay_spread` did: per request, in trace order, when it was sent and
    answered (ns after the common start), its NBD error, and whether the server served it
    in the reservation phase; per tenant and server whether that server took storqos'
    dmClock extension."""

    @property
    def issue_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def finish_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def error(self) -> npt.NDArray[np.uint32]:
        """The NBD error of each reply (0: none)."""
        ...
    @property
    def reservation(self) -> npt.NDArray[np.bool_]:
        """Served in mClock's reservation phase, as the server said (dmClock extension only)."""
        ...
    @property
    def dmclock(self) -> list[list[bool | None]]:
        """``dmclock[tenant][server]``: that server took the extension (None: not used)."""
        ...
    @property
    def late(self) -> int:
        """Requests sent more than 1 ms after their time."""
        ...
    @property
    def wrapped(self) -> int:
        """Requests whose offset was moved to end inside the export."""
        ...


def replay_spread(
    targets: list[list[tuple[str, str]]],
    at_ns: npt.NDArray[np.uint64],
    tenant: npt.NDArray[np.uint32],
    server: npt.NDArray[np.uint32],
    offset: npt.NDArray[np.uint64],
    size: npt.NDArray[np.uint32],
    is_read: npt.NDArray[np.bool_],
    *,
    dmclock: bool = True,
    depth: int = 64,
    timeout_s: float = 60.0,
) -> SpreadReplay:
    """Replay requests over NBD servers, ``targets[tenant][server]`` = ``(HOST:PORT,
    export)``, each request to its ``server`` of its tenant's: one connection per (tenant,
    server), open loop, ``depth`` in flight per connection. With ``dmclock`` each server is
    asked for storqos' dmClock extension, and those that take it get each request's δ and
    ρ from the tenant's tracker. No reply for ``timeout_s`` fails. Errors:
    ``storqos.base.errors.InputError``."""
    ...


def replay_local(
    path: str,
    at_ns: npt.NDArray[np.uint64],
    tenant: npt.NDArray[np.uint32],
    offset: npt.NDArray[np.uint64],
    size: npt.NDArray[np.uint32],
    is_read: npt.NDArray[np.bool_],
    *,
    direct: bool = True,
    cgroups: list[str | None] | None = None,
    depth: int = 256,
    stall_s: float = 10.0,
    writes: bool = False,
) -> LocalReplay:
    """Replay requests against a local file or block device: a thread per tenant (in
    ``cgroups[tenant]``, a cgroup v1 directory whose ``tasks`` it joins first, if given),
    open loop, each request issued ``at_ns`` after a common start, up to ``depth`` in
    flight per tenant. ``direct``: O_DIRECT, offsets rounded down and sizes up to 4 KiB.
    Offsets wrap into the file. Writes are refused unless ``writes``. No completion for
    ``stall_s`` with requests in flight fails. Errors: ``storqos.base.errors.InputError``."""
    ...
