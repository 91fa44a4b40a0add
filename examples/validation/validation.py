"""Predicted vs measured: the three validation experiments (WebSearch, MSR hm_0, FIU
mail; FCFS, WF2Q+, mClock), simulated and replayed live through the gateway, on the
emulated constant-rate device and on real local files with their measured profile: read
and written with O_DIRECT (the disk serves every request), and through the page cache.
Writes docs/results/validation.md and out/validate/ (reports, request logs).

    python examples/validation/validation.py          (or: make reproduce)

Needs the shared traces ($STORQOS_SHARED, else ../shared); without them each experiment
runs its stand-in (the bundled WebSearch excerpt, or a warning) and the page says so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl
from storqos.experiments.experiment import load
from storqos.live.validate import Validation, validate
from storqos.live.validation_report import markdown, write_html
from storqos.model.device_profile import DeviceProfile
from storqos.model.tenant_figures import PERCENTILES

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXPERIMENTS = ("websearch", "hm_0", "fiu_mail")
#: The targets on the emulated device: IOPS within 3 %, p99 within 10 %; on
#: files with a calibrated profile: p50 within 20 %.
TARGETS = {"emulated": {"iops_err": 0.03, "p99_err": 0.10}, "direct": {"iops_err": 0.03, "p50_err": 0.20},
           "file": {"iops_err": 0.03, "p50_err": 0.20}}
#: The live devices, in the page's order (storqos.live.validate.MODES).
MODES = ("emulated", "direct", "file")
#: Live replays counted per run (`storqos validate --repeats`), the runs in turn: real
#: files move from minute to minute under one replay (the device at rest by ±10-37 %),
#: the emulated device does not.
REPEATS = {"emulated": 1, "direct": 3, "file": 3}


def _misses(v: Validation, mode: str) -> pl.DataFrame:
    t = v.table()
    cond = pl.lit(False)
    for col, bound in TARGETS[mode].items():
        cond = cond | (pl.col(col).abs() > bound)
    return t.filter(cond)


def _bias(t: pl.DataFrame) -> str:
    gap = (t["p50_ns_meas"] - t["p50_ns_pred"]) / 1e6
    return f"{gap.median():.2f} ms (from {gap.min():.2f} to {gap.max():.2f} ms)"


def _profile_line(profile: DeviceProfile) -> str:
    """A profile in a sentence: capacity, servers, paths at rest and in bursts."""
    return (f"capacity {profile.capacity_iops:,.0f} IOPS, parallelism {profile.parallelism}, "
            f"{profile.op_time_us:.1f} µs per op, path at rest p50 "
            + "; ".join(f"{op}s " + ", ".join(f"{p50:.0f} µs after {idle / 1000:.1f} ms idle"
                                             for idle, p50 in profile.rest_p50s_us(op)) for op in ("read", "write"))
            + "".join(f", {b.pattern} {b.op}s in bursts {b.finish_us:.0f} µs apart" for b in profile.burst or []) + ".")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "out" / "validate")
    ap.add_argument("--markdown", type=Path, default=REPO / "docs" / "results" / "validation.md")
    ap.add_argument("--only", choices=EXPERIMENTS, action="append", help="run only these experiments")
    ap.add_argument("--mode", choices=MODES, action="append", help="run only these live devices")
    args = ap.parse_args()
    names = args.only or list(EXPERIMENTS)
    sections: list[str] = []
    summary: list[str] = []
    t0 = time.time()
    work = args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    #: The profile of each (device, experiment): validate, given none, calibrates the
    #: experiment's files just before its replays, as `storqos validate --live-device`
    #: does. The disk moves under its profile from minute to minute (on a page whose
    #: three experiments shared one profile, the last of them found its device at rest
    #: +50..+57 % off it).
    profiles: dict[tuple[str, str], DeviceProfile] = {}
    for mode in [m for m in MODES if m in (args.mode or MODES)]:
        for name in names:
            exp = load(HERE / f"{name}.toml")
            print(f"==> {name} ({mode})", file=sys.stderr)
            v = validate(exp, mode=mode, workdir=work, repeats=REPEATS[mode],
                         progress=lambda m: print(m, file=sys.stderr))
            if v.profile is not None:
                profiles[mode, name] = v.profile
            out = args.out / f"{name}-{mode}"
            out.mkdir(parents=True, exist_ok=True)
            write_html(v, out / "report.html")
            v.table().write_parquet(out / "validation.parquet")
            miss = _misses(v, mode)
            t = v.table()
            behind = [f"{r.label} ({100 * r.schedule.get('late_fraction', 0):.1f} % > 1 ms late)"
                      for r in v.runs if r.fell_behind]
            sections.append(markdown(v))
            sections.append(
                f"Live p50 minus predicted p50: {_bias(t)}. Worst |Δ|: IOPS {100 * t['iops_err'].abs().max():.2f} %, "
                + ", ".join(f"p{q} {100 * t[f'p{q}_err'].abs().max():.1f} %" for q in PERCENTILES)
                + ". Replay issue-time error p99: "
                + ", ".join(f"{r.label} {r.schedule.get('issue_error_p99_us', 0):.0f} µs" for r in v.runs)
                + "." + (f" Fell behind: {', '.join(behind)}." if behind else "") + "\n")
            drift = [d for _, _, d in v.rest_drift()]
            moved = f"{100 * min(drift):+.0f}..{100 * max(drift):+.0f} %" if drift else "–"
            summary.append(f"| {name} | {mode} | {t.height} | {100 * t['iops_err'].abs().max():.2f} % | "
                           f"{100 * t['p50_err'].abs().max():.1f} % | {100 * t['p99_err'].abs().max():.1f} % | "
                           f"{moved} | {miss.height} |")
    head = [
        "# Validation: the simulator's prediction beside the live gateway", "",
        "Regenerate: `make reproduce` (or `python examples/validation/validation.py`); one experiment: "
        "`storqos validate examples/validation/NAME.toml [--live-device direct|file]`. "
        f"This run took {time.time() - t0:.0f} s on a 2-core machine; the gateway, the replay and fio share the "
        "cores.", "",
        "Each experiment is simulated, then replayed open loop (`storqos replay`, libnbd) against a gateway on "
        "loopback running the same policy spec, one export per tenant. **emulated**: the gateway emulates the "
        "experiment's constant-rate device (`--iops`). **direct**: real local files (256 MiB each, written "
        "full), which the gateway reads and writes with O_DIRECT (`--live-device direct`), so this machine's "
        "disk serves every request. **file**: the same files read through the page cache "
        "(`--live-device file`), so the software in front of them is most of what a request costs. On both, "
        "the gateway has the device profile's cost model and depth, the simulator the profile's measured "
        "model plus its path at rest (by the time the target was idle before the request) and, in bursts, "
        "the live path's time between two replies; each experiment's profile is measured just before its "
        "replays (as `storqos validate --live-device` does) through a FCFS gateway over such a file, served the "
        "same way, by the replay's own engine, the client measured live (`storqos.live.validate.calibrate_file`). "
        f"On real files every run is replayed {REPEATS['direct']} times, the policies in turn (`--repeats "
        f"{REPEATS['direct']}`), and the live figures are each tenant's medians over its replays: the disk "
        "moves from minute to minute, and one replay catches it wherever it is.",
        "",
        *[f"- Profile ({mode}, {name}): {_profile_line(p)}" for (mode, name), p in profiles.items()], "",
        "Targets: emulated, IOPS within 3 % and p99 within 10 % of the prediction; real files, p50 within 20 %. "
        "Δ = live / predicted − 1. *Device at rest Δ*: on files, the device's p50 at rest (the profile's lone "
        "4 KiB reads 2 ms apart, measured again after each replay; the median of a run's) beside the profile's: "
        "how far the device itself had moved from its profile.", "",
        "| experiment | device | cells | worst IOPS Δ | worst p50 Δ | worst p99 Δ | device at rest Δ | cells off target |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *summary, "",
        "## Where they disagree, and why", "",
        "- **Every live response carries the path the simulator does not model**: the replay's libnbd call, "
        "loopback TCP both ways, the gateway's parsing and reply. That adds a roughly constant 0.1 to 0.4 ms "
        "(the p50 gap above); it is a large share of a sub-millisecond p50 and a few percent of a tail of "
        "tens of milliseconds. The simulator's arrival is the trace time; the gateway's is when the request "
        "was parsed.",
        "- **Bursts the replay cannot issue at once**: MSR hm_0 has thousands of requests less than 10 µs "
        "apart; the replay issues one in about 20 µs, so the last of a burst leaves late (counted as "
        "'> 1 ms late' above; a burst of 101 reads took it 1.96 ms). Its log counts each response from the "
        "issue, so the prediction does too: each request issued one issue time (the profile's) after the one "
        "before, the lag taken off its simulated queue wait (it waited in the replay instead).",
        "- **On direct-I/O files the disk answers every request**, behind the gateway's I/O threads: a 4 KiB "
        "read takes about 50 µs on this machine's virtual disk at depth 1 (fio), 200 µs through the replay and "
        "the gateway, and more the more are in flight (280 µs at depths 2-4, 390 µs at depth 8): "
        "the disk's best throughput comes at depth 32, beyond the gateway's k slots. The profile's model "
        "follows that curve (each request slowed by the requests in service beside it, as measured at that "
        "depth), but never slower than the profile's bursts were answered: the curve is a closed loop whose "
        "times hold the client's turn-around, which a queue in the gateway does not wait for (19,900 reads/s "
        "at depth 8 in the closed loop, replies 30-32 µs apart in bursts through the same gateway). The bursts "
        "are measured through a gateway of the replays' depth k: through the calibration's 8 slots their "
        "replies came 17-22 µs apart, through 4 slots 26-34 µs, and a model that drained FIU's "
        "swap-in trains at the first rate put its live p50s 27-87 % above the prediction in three rounds of "
        "four, at the second 1-49 % (docs/validation.md, \"Bursts measured through the gateway's own "
        "depth\"). Lone requests pay the path at rest on top, as on "
        "page-cached files.",
        "- **The disk moves under its profile.** The same lone reads measured again and again move by ±10-37 % "
        "from one minute to the next on this machine's virtual disk (`benches/at_rest_repeat.py --direct`, "
        "BENCHMARKS.md), as much as the 20 % target; the *device at rest Δ* column gives how far the device was "
        "from its profile after each replay. FIU mail's live p50s move further: validated five times in one "
        "day with profiles alike (35-37k IOPS, k = 6-7), 8 of its 9 cells spread over more than 1.5× "
        "(docs/validation.md, \"FIU mail on the disk, five times in one day\"), beyond what any "
        "prediction can keep within 20 % of.",
        "- **Trains and the replay's own spin.** The replay spins through the last 300 µs before an issue, so "
        "through a train of requests closer together than that it spins all along. Before it yielded its CPU at "
        "every turn, a thread that the disk's completion woke on the replay's CPU waited for the "
        "loop's time slice: the first replies of a train of reads 80 µs apart came 1.7-2.0 ms after its first "
        "request, 0.7 ms since (`benches/direct_trains.py`, BENCHMARKS.md). FIU's swapper and kjournald come in "
        "such trains, and on direct files they had come out 40-130 % slower than predicted "
        "(docs/validation.md, \"On direct-I/O files\").",
        "- **Page-cached files are faster than the software in front of them.** There a request's device time "
        "is a few µs to tens of µs, and what a client sees is mostly software: the "
        "replay (Python and libnbd), loopback TCP, the gateway's parsing, its I/O threads and the reply. Back to "
        "back that path costs 16-26 µs; a request that arrives after a pause costs 60-140 µs, because the "
        "replay's and the gateway's threads were asleep. The profile measures both with the replay's own "
        "engine: back to back (the device model: k servers, service times and a capacity with the replay's "
        "per-request cost in them) and 4 KiB reads and writes spaced 0.25 to 50 ms apart; the difference, by "
        "rank, is the path at rest, which the prediction adds to the simulated requests that arrive with "
        "nothing in flight, by how long the target was idle before them. That is what a lone request pays, "
        "and where "
        "requests come alone (WebSearch: smooth, about 150 IOPS per tenant) the p50s agree best (the table "
        "above). In the bursts of MSR hm_0 and FIU mail (half of hm_0's requests are under 3 µs apart; "
        "kjournald writes the journal in trains 38 µs apart) the replay issues one request at a time and the "
        "path behind it answers one at a time, a write 70-115 µs after the one before (it wakes an I/O thread "
        "that waits for a CPU while the replay and the gateway's loop run), a write continuing the one before "
        "it 21-28 µs (kjournald's, nearly all), where the model's k servers answer "
        "k at once: the profile measures both times on bursts from rest, random and sequential, and the "
        "prediction gives no reply sooner than the path's time between two replies after the one before it "
        "(the sequential bursts' for a request that continues its tenant's previous one of its op). "
        "Measured on the wire (`benches/replay_path.py`), a read of a burst of 32 spends 314-413 µs between its "
        "request and its reply on loopback, a lone read 53-70 µs: the gateway's threads wait for the CPU of the "
        "replay, which goes on issuing the burst. "
        "The live p50 also moves by up to a third from one replay to the next on this machine (how often the "
        "threads found a CPU at once). A device that is slow beside its software (a disk, a throttled or "
        "remote volume, or the emulated device above) is where the model holds best.",
        "",
    ]
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text("\n".join(head) + "\n" + "\n".join(sections))
    print(f"wrote {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
