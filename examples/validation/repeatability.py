"""How far apart two validations of the same cell land: `storqos validate --live-device
file` (or `direct`) repeated, each time with a fresh calibration and fresh live replays,
on the three validation experiments (FCFS by default). Writes
docs/results/validation_repeatability.md (``--live-device direct``:
validation_repeatability_direct.md; with ``--direct-reads io_uring`` too:
validation_repeatability_direct_io_uring.md), and each round's profile and request logs
(predicted and live) to out/validate/.

    python examples/validation/repeatability.py [--rounds 3] [--policy fcfs] [--live-device direct] [--direct-reads io_uring]

Each round does what one validation does: calibrate a 256 MiB file through a FCFS
gateway (the profile), simulate each experiment with that profile and replay it live
through a gateway configured from it. Per cell (experiment × tenant) the page gives the
predicted and the live p50 of every round, and two spreads:

- *live about its median*: the largest |live / median(live) − 1| over the rounds. No
  single prediction, however good, is within 20 % of every round when it exceeds 20 %
  on both sides (then the best one, the middle of the range, misses by more);
- *best constant*: the smallest worst-case |Δ| any one fixed prediction could have over
  the rounds (the middle of the live range: (max − min) / (max + min)).

Beside them, the device at rest Δ of each round: the profile's lone 4 KiB reads 2 ms
apart, measured again after the replay, against the profile's (how far the device had
moved from its profile while the cell ran).

Needs the shared traces ($STORQOS_SHARED, else ../shared).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import polars as pl
from storqos.experiments.experiment import load
from storqos.live.gateway import DIRECT_READS
from storqos.live.validate import calibrate_file, fill_file, validate
from storqos.model.device_profile import DeviceProfile, dump_profile

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXPERIMENTS = ("websearch", "hm_0", "fiu_mail")
#: The target on files: p50 within 20 % of the prediction.
P50_TARGET = 0.20


def _at_rest(profile: DeviceProfile) -> str:
    """The path at rest's p50 (µs) at each measured spacing, reads then writes."""
    return "; ".join(f"{op[0]} " + " / ".join(f"{p50:.0f}" for _, p50 in profile.rest_p50s_us(op))
                     for op in ("read", "write"))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g}"


def _pcts(xs: list[float]) -> str:
    """Signed percentages, "–" where not measured."""
    return ", ".join("–" if x != x else f"{100 * x:+.0f} %" for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="validations per cell (default %(default)s)")
    ap.add_argument("--policy", default="fcfs", help="the experiments' policy to run (default %(default)s)")
    ap.add_argument("--out", type=Path, default=REPO / "out" / "validate")
    ap.add_argument("--live-device", choices=("file", "direct"), default="file",
                    help="file: read through the page cache; direct: with O_DIRECT (default %(default)s)")
    ap.add_argument("--direct-reads", choices=DIRECT_READS, default="threads",
                    help="with --live-device direct: how the gateways read the files (default %(default)s)")
    ap.add_argument("--markdown", type=Path, default=None,
                    help="default: docs/results/validation_repeatability.md, _direct.md with --live-device direct, "
                         "_direct_io_uring.md with --direct-reads io_uring too")
    args = ap.parse_args()
    direct = args.live_device == "direct"
    ring = args.direct_reads == "io_uring"
    if ring and not direct:
        ap.error("--direct-reads io_uring reads direct files: give --live-device direct too")
    tag = args.live_device + ("-io_uring" if ring else "")
    reads_flag = " --direct-reads io_uring" if ring else ""  # as given to validate, in the page
    if args.markdown is None:
        suffix = ("_direct" if direct else "") + ("_io_uring" if ring else "")
        args.markdown = REPO / "docs" / "results" / f"validation_repeatability{suffix}.md"
    if not 2 <= args.rounds <= 10:
        ap.error(f"--rounds must be 2..10, got {args.rounds}")
    work = args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    exps = []
    for name in EXPERIMENTS:
        exp = load(HERE / f"{name}.toml")
        runs = [r for r in exp.runs if r.policy_name == args.policy]
        if not runs:
            ap.error(f"{name}: no run of policy {args.policy!r} (has {', '.join(exp.policies)})")
        exps.append(dataclasses.replace(exp, runs=runs))
    t0 = time.time()
    rows: list[dict[str, object]] = []
    profiles: list[str] = []
    for k in range(args.rounds):
        img = fill_file(work / "calibrate.img", 256 << 20, direct=direct)
        say = lambda m, k=k: print(f"[round {k + 1}/{args.rounds}] {m}", file=sys.stderr)  # noqa: E731
        profile = calibrate_file(img, direct=direct, direct_reads=args.direct_reads, progress=say)
        img.unlink()
        profiles.append(f"| {k + 1} | {time.strftime('%H:%M', time.gmtime())} | {profile.capacity_iops:,.0f} | "
                        f"{profile.parallelism} | {_at_rest(profile)} | "
                        + " / ".join(f"{b.finish_us:.0f}{'s' if b.pattern == 'sequential' else ''}"
                                     for b in profile.burst or []) + " |")
        (args.out / f"repeat-{k + 1}-{tag}.profile.toml").write_text(dump_profile(profile))
        for exp in exps:
            v = validate(exp, mode=args.live_device, profile=profile, workdir=work, direct_reads=args.direct_reads,
                         progress=say)
            for run in v.runs:  # the logs, to predict them again offline with another profile
                stem = f"repeat-{k + 1}-{tag}-{exp.name}-{run.label}"
                run.measured.write_parquet(args.out / f"{stem}.live.parquet")
                run.predicted.write_parquet(args.out / f"{stem}.predicted.parquet")
            drift = {label: d for label, _, d in v.rest_drift()}
            for r in v.table().iter_rows(named=True):
                rows.append({"round": k + 1, "experiment": exp.name, "tenant": r["name"],
                             "pred": r["p50_ns_pred"], "live": r["p50_ns_meas"],
                             "rest": drift.get(r["run"], float("nan"))})
    df = pl.DataFrame(rows)
    cells = df.group_by("experiment", "tenant", maintain_order=True).agg(
        pl.col("pred"), pl.col("live"), pl.col("rest"),
        ((pl.col("live") / pl.col("live").median() - 1).abs().max()).alias("about_median"),
        ((pl.col("live").max() - pl.col("live").min()) / (pl.col("live").max() + pl.col("live").min()))
        .alias("best_constant"),
        ((pl.col("live") / pl.col("pred") - 1).abs().max()).alias("worst"),
    )
    lines = [
        f"# Validation on {'direct-I/O ' if direct else ''}files{', read through io_uring' if ring else ''}, "
        "repeated: how far apart two runs of the same cell land", "",
        f"Regenerate: `python examples/validation/repeatability.py --rounds {args.rounds} --policy "
        f"{args.policy}{' --live-device direct' if direct else ''}{reads_flag}` "
        f"({time.time() - t0:.0f} s here, {time.strftime('%Y-%m-%d', time.gmtime())}, 2 cores). "
        f"Each round is one `storqos validate --live-device {args.live_device}{reads_flag}` of every "
        "experiment: a fresh "
        "calibration, "
        "then each experiment simulated with that profile and replayed live through a gateway configured "
        "from it. p50s in ms; Δ = live / predicted − 1.", "",
        "Profiles (capacity IOPS, parallelism k, path at rest p50 µs by the spacing it was measured at, "
        "time between replies in bursts µs, s: of sequential requests; reads then writes):", "",
        "| round | UTC | IOPS | k | at rest | bursts |", "|---:|---|---:|---:|---|---|", *profiles, "",
        "| experiment | tenant | predicted p50 per round | live p50 per round | Δ per round | device at rest Δ "
        "| live about its median | best constant |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    for c in cells.iter_rows(named=True):
        deltas = ", ".join(f"{100 * (live / pred - 1):+.0f} %" for pred, live in zip(c["pred"], c["live"], strict=True))
        lines.append(f"| {c['experiment']} | {c['tenant']} | {', '.join(map(_ms, c['pred']))} | "
                     f"{', '.join(map(_ms, c['live']))} | {deltas} | {_pcts(c['rest'])} | "
                     f"{100 * c['about_median']:.0f} % | "
                     f"{100 * c['best_constant']:.0f} % |")
    n = cells.height
    within = int((cells["worst"] <= P50_TARGET).sum())
    out_of_reach = int((cells["best_constant"] > P50_TARGET).sum())
    lines += [
        "",
        f"Cells within {P50_TARGET:.0%} of the prediction in every round: {within} of {n}. Cells no fixed "
        f"prediction could hold within {P50_TARGET:.0%} in every round (best constant > {P50_TARGET:.0%}): "
        f"{out_of_reach} of {n}.",
    ]
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text("\n".join(lines) + "\n")
    df.write_parquet(args.out / "repeatability.parquet")
    print(f"wrote {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
