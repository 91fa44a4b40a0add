"""``storqos warm``: predictive tier warming on a multi-day trace (seed 002).

Learns the High/Low intensity model on the first days (K-means + silhouette day
classes, hierarchical Markov model of state durations), reports its prediction error on
the remaining days, and compares the system-work policies user-only / feedback /
prediction / oracle for a fast tier of the given capacity and warm-up rate.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_size, parse_bandwidth, parse_duration, parse_size


def _pair(text: str | None, where: str) -> tuple[float, float] | None:
    if text is None or text.strip().lower() in ("", "none", "off"):
        return None
    parts = [p.strip().rstrip("%") for p in text.split(",")]
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"malformed thresholds {text!r} (expected LOWER,UPPER hit rates, e.g. 0.5,0.9)", where) from None
    if len(vals) != 2:
        raise InputError(f"expected two hit rates LOWER,UPPER, got {text!r}", where)
    vals = [v / 100 if v > 1 else v for v in vals]
    if not 0 <= vals[0] <= vals[1] <= 1:
        raise InputError(f"expected 0 <= LOWER <= UPPER <= 1 (or percent), got {text!r}", where)
    return vals[0], vals[1]


def _origin(path: Path, fmt: str | None, origin: str | None) -> datetime | None:
    if origin is not None:
        for pattern in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
            try:
                return datetime.strptime(origin.strip(), pattern)
            except ValueError:
                continue
        raise InputError(f"malformed date {origin!r} (expected e.g. 1992-05-30 00:03)", "--origin")
    from storqos.traces import detect_format
    from storqos.traces.srt import trace_origin

    if (fmt or detect_format(path)) == "srt":
        return trace_origin(path)
    return None


def warm_cmd(
    trace: Annotated[Path, typer.Argument(help="Multi-day trace file (any supported format), or requests counted per "
                                            "interval (a BlockTraceFeatures CSV, or --format counts).",
                                       show_default=False)],
    fast_tier: Annotated[str, typer.Option("--fast-tier", help="Fast-tier capacity C (the user working set it holds).")] = "64GiB",
    warm_rate: Annotated[str, typer.Option("--warm-rate", help="Warm-up transfer speed F; the fast tier takes its capacity / this speed to warm.")] = "200MiB/s",
    train_days: Annotated[int | None, typer.Option("--train-days", help="Days to learn from (default 14, or all but the last 2 of a shorter trace).")] = None,
    threshold: Annotated[float | None, typer.Option("--threshold", help="High/Low threshold in requests/min (default: learned by 2-means on log intensity).")] = None,
    origin: Annotated[str | None, typer.Option("--origin", help="Local date and time of the trace's first request (default: an SRT header's tracedate, else Monday 00:00).")] = None,
    fast_time: Annotated[str, typer.Option("--fast-time", help="Mean user service time on the fast tier.")] = "0.2ms",
    slow_time: Annotated[str, typer.Option("--slow-time", help="Mean user service time on the slow tier.")] = "4ms",
    util_limit: Annotated[float, typer.Option("--util-limit", help="background work fills the device up to this utilisation.")] = 0.7,
    h_low: Annotated[str, typer.Option("--h-low", help="Hit-rate thresholds LOWER,UPPER in Low (stop system work at LOWER, resume at UPPER; 0,0 = never stop).")] = "0,0",
    h_high: Annotated[str | None, typer.Option("--h-high", help="Hit-rate thresholds LOWER,UPPER in High (default: no system work in High).")] = None,
    schedule_rows: Annotated[int, typer.Option("--schedule-rows", help="Schedule events to print (the JSON has all).")] = 12,
    format: Annotated[str | None, typer.Option("--format", "-f", help="Trace format, or blocktracefeatures / counts for a count series (rows time,count); detected when omitted.")] = None,
    time_unit: Annotated[str | None, typer.Option("--time-unit", help="Time unit of the trace's timestamps where the format leaves it open (ns, us, ms, s; counts: s by default).")] = None,
    interval: Annotated[str | None, typer.Option("--interval", help="A count series' interval, where its rows are not evenly spaced (--format counts).")] = None,
    sort: Annotated[bool, typer.Option("--sort", help="Sort requests by time instead of rejecting a trace whose timestamps go backwards.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")] = False,
    save: Annotated[Path | None, typer.Option("--save", help="Write the learned day model to this TOML file, for a "
                                                             "gateway's \\[background] job (docs/gateway-seeds.md).")] = None,
) -> None:
    """Learn High/Low periods of a multi-day trace and compare tier-warming policies (user-only, feedback, prediction, oracle).

    Prints the learned model (threshold, day classes, state durations), the error of
    predicted change times on the days not used for training, the prediction policy's
    schedule (system-work start/stop, warm-up), and user response time and completed
    system work of user-only, feedback, prediction and oracle.

    Example: [bold]storqos warm ../shared/traces/hp-hplajw-1week/ajw.1week.srt --fast-tier 64GiB --warm-rate 200MiB/s[/bold]

    Example: [bold]storqos warm block_snap_w96.csv --train-days 5[/bold]   (a BlockTraceFeatures snapshot)
    """
    from storqos.base.progress import run_with_progress
    from storqos.planning.warming import FastTier, Knobs, per_minute, warm
    from storqos.traces import read_trace

    cap = parse_size(fast_tier, "--fast-tier")
    rate = parse_bandwidth(warm_rate, "--warm-rate")
    if schedule_rows < 0:
        raise InputError(f"must be >= 0, got {schedule_rows}", "--schedule-rows")
    if threshold is not None and not (math.isfinite(threshold) and threshold > 0):
        raise InputError(f"must be a finite number > 0 of requests/min, got {threshold:g}", "--threshold")
    tier = FastTier(cap, rate, parse_duration(fast_time, "--fast-time", "ms") / 1e9,
                    parse_duration(slow_time, "--slow-time", "ms") / 1e9)
    knobs = Knobs(h_low=_pair(h_low, "--h-low") or (0.0, 0.0), h_high=_pair(h_high, "--h-high"), util_limit=util_limit)
    from storqos.planning.warming.counts import COUNT_FORMATS, detect_counts, from_counts, read_counts

    counted = format if format in COUNT_FORMATS else (detect_counts(trace) if format is None else None)
    if interval is not None and counted is None:
        raise InputError("--interval is for a count series (--format counts)", "--interval")
    # A count series has no clock of its own: --origin places it, else Monday 00:00.
    start = _origin(trace, format, origin) if counted is None or origin is not None else None
    minute, weekday = (0, 0) if start is None else (start.hour * 60 + start.minute, start.weekday())
    if counted is not None:
        if sort:
            raise InputError("a count series is read in its order: --sort is for request traces", "--sort")
        series = read_counts(trace, counted, time_unit=time_unit,
                             interval_ns=None if interval is None else parse_duration(interval, "--interval"))
        intensity = from_counts(series, start_minute_of_day=minute, first_weekday=weekday)
    else:
        df = run_with_progress(f"reading {trace.name}",
                               lambda: read_trace(trace, format=format, time_unit=time_unit, sort=sort))
        intensity = per_minute(df, start_minute_of_day=minute, first_weekday=weekday)
    rep = run_with_progress("learning and comparing policies",
                            lambda: warm(intensity, tier, train_days=train_days, threshold=threshold, knobs=knobs))
    if save is not None:
        from storqos.planning.warming.model_file import save_model

        assert rep.day_model is not None
        save_model(rep.day_model, save)
    summary = rep.summary()
    summary |= {"trace": str(trace), "origin": None if start is None else start.isoformat(" "),
                "fast_tier_bytes": cap, "warm_rate_bytes_per_s": rate}
    if json_out:
        emit_json(summary)
        return
    _print(summary, rep, tier, schedule_rows)


def _print(summary: dict[str, Any], rep: Any, tier: Any, rows: int) -> None:
    m = summary["model"]
    out.print(f"fast tier {fmt_size(summary['fast_tier_bytes'])} warmed at {fmt_size(summary['warm_rate_bytes_per_s'])}/s: "
              f"T_fast = C/F = {rep.t_fast_s / 60:.3g} min; trained on days {rep.train_days.start}–{rep.train_days.stop - 1}, "
              f"evaluated on days {rep.test_days.start}–{rep.test_days.stop - 1}")
    out.print(f"High/Low threshold: {m['threshold_per_min']:.3g} requests/min; day classes k = {m['classes']} "
              f"(silhouette by k: {', '.join(f'{k}: {v:.3f}' for k, v in m['silhouette_by_k'].items()) or 'k ≤ 1 allowed'})")
    t = Table(title="learned model: day classes and state durations (min)")
    for c in ("class", "days", "weekdays", "state", "periods", "median", "p10", "p90"):
        t.add_column(c, justify="left" if c in ("weekdays", "state") else "right")
    for r in m["state_durations"]:
        c = r["class"]
        t.add_row(str(c), str(m["days_per_class"][c]), weekday_ranges(m["weekdays_per_class"][c]), r["state"],
                  str(r["periods"]), f"{r['median_min']:.0f}", f"{r['p10_min']:.0f}", f"{r['p90_min']:.0f}")
    out.print(t)
    e = summary["prediction_error_min"]
    if e.get("changes"):
        out.print(f"prediction error on held-out days ({int(e['changes'])} changes): mean |error| "
                  f"{e['all_mean_abs_min']:.1f} min, median {e['all_median_abs_min']:.1f} min; Low→High: mean |error| "
                  f"{e.get('to_high_mean_abs_min', float('nan')):.1f} min, bias {e.get('to_high_bias_min', float('nan')):+.1f} min")
    sched = rep.schedule("prediction")
    s = Table(title=f"prediction policy schedule (first {min(rows, len(sched))} of {len(sched)} events)")
    for c in ("day", "weekday", "time", "event"):
        s.add_column(c)
    for ev in sched[:rows]:
        s.add_row(str(ev["day"]), ev["weekday"], ev["time"], ev["event"])
    out.print(s)
    cmp = Table(title="policies: user response time (ms) and completed system work",
                caption="cold % = user requests served by the cold tier; work h = hours of system work done; "
                        "on h = hours the system ran")
    for col in ("policy", "mean", "p50", "p90", "p99", "cold %", "work h", "on h"):
        cmp.add_column(col, justify="left" if col == "policy" else "right")
    for r in summary["comparison"]:
        cmp.add_row(r["policy"], f"{r['mean_ms']:.3g}", f"{r['p50_ms']:.3g}", f"{r['p90_ms']:.3g}", f"{r['p99_ms']:.3g}",
                  f"{100 * r['cold_fraction']:.1f}", f"{r['system_work_h']:.1f}", f"{r['system_on_h']:.1f}")
    out.print(cmp)


WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def weekday_ranges(days: list[int]) -> str:
    """Weekdays (0 = Monday) with runs of three or more as ranges: ``Mon–Fri``,
    ``Sat,Sun``, ``Mon,Wed–Fri``."""
    runs: list[list[int]] = []
    for d in sorted(set(days)):
        if runs and runs[-1][-1] == d - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ",".join(f"{WEEKDAYS[r[0]]}–{WEEKDAYS[r[-1]]}" if len(r) >= 3 else ",".join(WEEKDAYS[d] for d in r) for r in runs)


def register(app: typer.Typer) -> None:
    """Add ``storqos warm`` to the app."""
    app.command("warm")(warm_cmd)


__all__ = ["register"]
