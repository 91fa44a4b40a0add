"""``storqos advise``: from tenants' traces and SLOs to the cheapest (policy, capacity)
pair, proven by simulation (docs/advise.md). It composes the seed papers
rather than implementing a new policy: every policy it tries is a core ``Scheduler``
built by :func:`storqos.model.specs.policy_spec`. One concept per module, in the order the
method runs (each imports only those above it):

- :mod:`.family`: device families, a capacity → the core's device spec (a calibrated
  device profile is scaled);
- :mod:`.problem`: the tenants, their SLOs (``pP<=D``, judged end to end), the trace,
  the headroom (every SLO must also hold at that much more load: 10 % by default);
- :mod:`.bounds`: the planner's Cmin bounds on the capacity (seed 000), bad input
  against the device;
- :mod:`.inputs`: reading an advise file (an experiment file with SLOs);
- :mod:`.policies`: each policy's parameters from the SLOs (seeds 000, 001, 003, mClock);
- :mod:`.evaluation`: one simulation at a capacity, judged end to end (seed 001's own
  metric beside); a capacity tried at both loads;
- :mod:`.bracket`: closing [fails, holds], interpolation never worse than bisection
  (regula falsi, Illinois, ITP's projection);
- :mod:`.proof`: minimality at 0.98 ×, why a policy is ``never``;
- :mod:`.capacity_search`: one policy's least capacity: bracket, close, prove;
- :mod:`.advice`: the ranking and the recommendation in words;
- :mod:`.parallel`: every policy's search on the sweep back ends;
- :mod:`.report`: ``advice.json``, ``advice.parquet``, ``report.html``.

The names below are the API the CLI (:mod:`storqos.cli.commands.advise`), the tests and the
benchmark use.
"""

from __future__ import annotations

from storqos.planning.advise.advice import Advice, explain, reason
from storqos.planning.advise.bounds import CMIN_SLACK, MAX_CAPACITY_OVER_LOAD, prepare
from storqos.planning.advise.bracket import bisection_steps, close
from storqos.planning.advise.capacity_search import MAX_RESTARTS, TOLERANCE, plain_bisection, search
from storqos.planning.advise.evaluation import Evaluation, Runner, Trial, evaluate
from storqos.planning.advise.family import FAMILIES, DeviceFamily, device_family
from storqos.planning.advise.inputs import load_problem, parse_headroom, parse_slo, problem_from_dict
from storqos.planning.advise.parallel import advise
from storqos.planning.advise.policies import (
    DEFAULT_POLICIES,
    DISPLAY,
    SUPPORTED_POLICIES,
    parse_policies,
    policy_floor,
    policy_for,
    rates,
)
from storqos.planning.advise.problem import (
    DEFAULT_HEADROOM,
    MAX_HEADROOM,
    Problem,
    Slo,
    TenantInfo,
    scaled_trace,
    to_capacity,
    to_iops,
)
from storqos.planning.advise.proof import PROOF_FACTOR, PolicyAdvice
from storqos.planning.advise.report import html_report, write_outputs

__all__ = [
    "CMIN_SLACK",
    "DEFAULT_HEADROOM",
    "DEFAULT_POLICIES",
    "DISPLAY",
    "FAMILIES",
    "MAX_CAPACITY_OVER_LOAD",
    "MAX_HEADROOM",
    "MAX_RESTARTS",
    "PROOF_FACTOR",
    "SUPPORTED_POLICIES",
    "TOLERANCE",
    "Advice",
    "DeviceFamily",
    "Evaluation",
    "PolicyAdvice",
    "Problem",
    "Runner",
    "Slo",
    "TenantInfo",
    "Trial",
    "advise",
    "bisection_steps",
    "close",
    "device_family",
    "evaluate",
    "explain",
    "html_report",
    "load_problem",
    "parse_headroom",
    "parse_policies",
    "parse_slo",
    "plain_bisection",
    "policy_floor",
    "policy_for",
    "prepare",
    "problem_from_dict",
    "rates",
    "reason",
    "scaled_trace",
    "search",
    "to_capacity",
    "to_iops",
    "write_outputs",
]
