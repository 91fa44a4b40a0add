"""The command-line options of a scheduling policy, shared by ``storqos simulate`` and
``storqos serve`` (the same policy runs in simulated time and live, so it takes the
same options in both; :func:`storqos.model.specs.policy_spec` turns them into a spec)."""

from __future__ import annotations

from typing import Annotated

import typer

from storqos.model.specs import POLICIES, aliases_text

#: ``--policy``'s help: the policies, and the other names each is taken by (nothing else is).
POLICY_HELP = "Scheduling policy: " + " | ".join(POLICIES) + f". Also taken by these names: {aliases_text()}."
PolicyOpt = Annotated[str, typer.Option("--policy", "-p", help=POLICY_HELP)]
WeightsOpt = Annotated[str | None, typer.Option(help="Per-tenant weights (wf2q, sfq, yfq, mclock), in tenant order, e.g. 2,1.")]
DeadlineOpt = Annotated[
    str | None, typer.Option(help="edf: per-tenant relative deadlines, in tenant order (10ms,50ms); miser, rtt-fq: "
                                  "the one deadline δ of the primary class.")
]
CminOpt = Annotated[str | None, typer.Option(help="miser / rtt-fq: primary-class capacity Cmin (IOPS).")]
SloOpt = Annotated[
    str | None,
    typer.Option(help="Per-tenant SLOs for sarc+avatar & co, in tenant order: web:160iops@400ms,oltp:190iops@900ms."),
]
PercentileOpt = Annotated[str | None, typer.Option(help="SLO latency percentile (default 95).")]
PeriodOpt = Annotated[str | None, typer.Option(help="sarc+*: SARC credit period T_SARC (default 100ms).")]
ControlWindowOpt = Annotated[str | None, typer.Option(help="sarc+*: AVATAR / Facade control window (default 1s).")]
FacadeOverloadOpt = Annotated[
    str | None, typer.Option(help="sarc+facade: how Facade detects overload: 'class' (default: any class above its rate) or 'total' (the sum of arrivals above the sum of rates).")
]
ReservationsOpt = Annotated[str | None, typer.Option(help="mclock: per-tenant reservations in IOPS, e.g. 300,0,100.")]
LimitsOpt = Annotated[str | None, typer.Option(help="mclock: per-tenant limits in IOPS (none = no limit), e.g. none,1k.")]
AtLimitOpt = Annotated[str | None, typer.Option("--at-limit", help="mclock: a request beyond its tenant's limit waits "
                                                                   "(wait, the default), is served when the device "
                                                                   "would idle (allow), or is refused at once for the "
                                                                   "client to retry (reject, or reject:50ms to let "
                                                                   "50 ms of requests ahead of the limit wait).")]
