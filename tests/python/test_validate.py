"""`storqos validate`: an experiment simulated and replayed live
through a gateway it starts and stops; per-tenant IOPS and percentiles predicted beside
measured, CDF plots in the report. Short traces and generous bounds here; the full
validation table is docs/results/validation.md (`make reproduce`)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import Run, assert_one_line_error, run_cli, until_calm
from storqos.model.device_profile import DeviceProfile
from storqos.traces import bundled
from test_experiment import headless

EXPERIMENT = """
name = "ws-short"
seed = 1
duration = "4s"

[device]
kind = "constant"
capacity = "550"

[[trace]]
path = "{trace}"
format = "mqsim"
split = "device"
keys = ["0", "1", "2"]
name = "disk"

[[policy]]
kind = "fcfs"

[[policy]]
kind = "wf2q"
weights = [2, 1, 1]
"""


class NoGateway(contextlib.AbstractContextManager):  # type: ignore[type-arg]
    """A gateway process stand-in for tests that stub the measurements behind it."""

    def __init__(self, cfg: object) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        return None

    def uri(self, name: str) -> str:
        return f"nbd://127.0.0.1:1/{name}"


def _experiment(tmp_path: Path, text: str = EXPERIMENT) -> Path:
    p = tmp_path / "exp.toml"
    p.write_text(text.format(trace=bundled("websearch")))
    return p


def test_emulated_device_live_matches_the_prediction(tmp_path: Path) -> None:
    out = tmp_path / "out"
    md = tmp_path / "v.md"
    exp = _experiment(tmp_path)

    def once() -> Run:
        shutil.rmtree(out, ignore_errors=True)
        md.unlink(missing_ok=True)
        return run_cli("validate", str(exp), "--out", str(out), "--markdown", str(md), "--repeats", "2", columns=80)

    def kept_time(r: Run) -> bool:
        if r.code != 0:
            return True
        replays = json.loads((out / "summary.json").read_text())["replays"]
        return any(s["fell_behind"] is None for s in replays.values())

    # validate replays a run that fell behind up to three times; a machine that stalls
    # through all of them (seen in a fresh `make test`: six replays 1-2 % late, the
    # machine 20 % slow) gets one more go once it is quiet.
    r = until_calm(once, kept_time, attempts=2)
    assert r.code == 0, r.err
    assert all(len(line) <= 80 for line in r.out.splitlines()), r.out
    t = pl.read_parquet(out / "validation.parquet")
    assert t.height == 6 and sorted(set(t["run"])) == ["fcfs", "wf2q"]
    # Every request was replayed and completed; the live rates are the predicted ones.
    trace_requests = int(t.filter(pl.col("run") == "fcfs")["requests"].sum())
    assert pl.read_parquet(out / "requests_measured.parquet").height == 2 * trace_requests
    assert (t["iops_err"].abs() < 0.03).all(), t
    # The emulated device is the simulator's constant device: the tails agree (the
    # target is 10 %; 2 shared cores, a short trace: 25 % here) wherever the
    # replay kept to the trace's timing. A replay held back by a busy machine (CI saw one
    # with 19 % of its requests over 1 ms late, and its p99 at 2x) is made again, up to
    # three times; one that never kept up is reported, not compared.
    replays = json.loads((out / "summary.json").read_text())["replays"]
    on_time = [run for run, s in replays.items() if s["fell_behind"] is None]
    assert on_time, replays
    for run, s in replays.items():
        assert s["rest_p50_us"] is None, "an emulated device has no time at rest to measure again"
        # Two replays counted (--repeats 2), each made up to three times until one kept time.
        assert s["repeats"] == 2 and 2 <= s["attempts"] <= 6
        if s["fell_behind"]:
            assert f"{run}: the replay fell behind" in r.err and run in md.read_text()
        # Each tenant's live p50 is the median (of two: the mean) of its replays' p50s.
        per_replay = s["p50_ns_per_replay"]
        assert len(per_replay) == 2 and all(len(p50s) == 3 for p50s in per_replay)
        rows = t.filter(pl.col("run") == run).sort("tenant")["p50_ns_meas"].to_list()
        assert rows == pytest.approx([(a + b) / 2 for a, b in zip(*per_replay, strict=True)])
    assert "medians over 2 replays" in " ".join(r.out.split()), r.out
    # Progress on stderr, stdout the result: first the plan and about how long it takes
    # (2 policies × 2 replays of the trace's 4 s: 16 s, up to 3 attempts each), then one
    # line per stage: each run simulated, each replay and each replay made again.
    assert not re.search(r"simulating|replaying|^\[\d+:\d\d\]", r.out, re.M), r.out
    said = [ln for ln in r.err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    plan = re.fullmatch(r"validate: 2 policies × 2 replays of [\d.]+ s each on an emulated device, about (\d+) s "
                        r"\(up to (\d+) s if measurements are made again\)", said[0])
    assert plan and abs(int(plan.group(1)) - 16) <= 5 and abs(int(plan.group(2)) - 3 * 16) <= 10, said[0]
    stages = [re.sub(r"^\[\d+:\d\d\] ", "", ln) for ln in said[1:-1]]
    assert all(re.match(r"^\[\d+:\d\d\] ", ln) for ln in said[1:-1]), said
    n = trace_requests
    assert [ln for ln in stages if "replaying again" not in ln] == [
        f"fcfs: simulating {n:,} requests (1/2)", f"wf2q: simulating {n:,} requests (2/2)",
        *(f"{run}: replaying {n:,} requests live ({i}/2) (replay {k} of 2)" for k in (1, 2)
          for i, run in ((1, "fcfs"), (2, "wf2q")))]
    assert sum("replaying again" in ln for ln in stages) == sum(s["attempts"] for s in replays.values()) - 4
    assert re.fullmatch(r"validate: done in \d+:\d\d \(expected about \d+ s\)", said[-1]), said
    close = t.filter(pl.col("run").is_in(on_time))
    assert (close["p99_err"].abs() < 0.25).all(), close.select("run", "name", "p99_ns_pred", "p99_ns_meas")
    # WF2Q+ with weights 2:1:1 favours disk/0 over FCFS, predicted and measured alike.
    p99 = {(r["run"], r["name"]): r for r in t.to_dicts()}
    for side in ("pred", "meas"):
        assert p99[("wf2q", "disk/0")][f"p99_ns_{side}"] < p99[("fcfs", "disk/0")][f"p99_ns_{side}"]
    page = (out / "report.html").read_text()
    assert '<meta name="storqos-figures" content="2">' in page and "predicted" in page and "measured" in page
    assert "The device at rest" not in page
    for s in replays.values():  # the time the host took from the machine, where it took any
        assert (f"the host took {s.get('steal_ms') or 0:,.0f} ms of CPU time from this machine (steal time)" in page) == bool(s.get("steal_ms"))
    assert md.read_text().count("| fcfs |") == 3
    # The CDFs render in a browser: every figure drew its predicted and measured lines.
    dom, console = headless(out / "report.html")
    assert console == [], console
    figures = re.split(r'(?=<div id="fig-\d+")', dom)[1:]
    assert len(figures) == 2
    for fig in figures:
        assert "js-plotly-plot" in fig[: fig.index(">") + 1] and fig.count('class="trace scatter') >= 6


@pytest.mark.parametrize(("device", "reads"), [("file", None), ("direct", None)])
def test_file_device_with_its_profile(tmp_path: Path, device: str, reads: str | None) -> None:
    """Real files behind the gateway, read through the page cache or with O_DIRECT (on
    the gateway's I/O threads), modelled by a profile measured on
    the spot (through a gateway serving its file the same way): every request replayed
    at the predicted rate, the median near the predicted one."""
    out = tmp_path / "out"
    exp = _experiment(tmp_path, EXPERIMENT.replace('duration = "4s"', 'duration = "2s"')
                      .replace('[[policy]]\nkind = "wf2q"\nweights = [2, 1, 1]\n', ""))
    # One pass of calibration (validate's default is 3) of 0.1 s per point (its default
    # is 0.5) keeps the test a minute shorter: the requests at rest, which the
    # prediction's bound below rests on, are measured for their own fixed counts
    # whatever the point's time; the bound was set with one-pass profiles.
    r = run_cli("validate", str(exp), "--live-device", device, "--calibration-passes", "1", "--calibration-time",
                "0.1", "--export-size", "64MiB", "--out", str(out), *(["--direct-reads", reads] if reads else []))
    assert r.code == 0, r.err
    t = pl.read_parquet(out / "validation.parquet")
    assert t.height == 3 and (t["iops_err"].abs() < 0.03).all(), t
    live_device = json.loads((out / "summary.json").read_text())["live_device"]
    assert ("direct-I/O files" in live_device) == (device == "direct")
    assert ("read through io_uring" in live_device) == (reads == "io_uring"), live_device
    # The prediction adds the path at rest (reads spaced 2 ms apart) to the simulated
    # device's times, all measured by the replay's own engine. Measured p50 errors:
    # -13 % to +19 % over twelve tenants in four runs on a quiet machine with fio's
    # device model, -19 % to +4 % over nine in `make reproduce` with the
    # replay's. Measured over predicted p50 in nine runs of this test's experiment on a
    # quiet machine: 0.67-1.10, the measured p50 itself moving
    # 69-141 µs from one run to the next and the reads at rest 49-112 µs from one
    # calibration to the next; CI once saw 0.50 (and before the k and the path at rest
    # were fixed, 2.2x the other way).
    # With O_DIRECT (the disk answers every request), WebSearch's tenants came out at
    # 1.11-1.37 in four validations.
    # The target of 20 % is a benchmark figure (docs/results/validation.md);
    # asserted here is what survives this noise: within 2.5x either way, which the
    # old model (the device's back-to-back time alone: 5-6 µs predicted against 100 µs
    # measured on a loaded run, 17x) fails.
    ratio = t["p50_ns_meas"] / t["p50_ns_pred"]
    summary = json.loads((out / "summary.json").read_text())
    # The profile it measured is kept whole, as `--device-profile` takes it.
    from storqos.model.device_profile import load_profile

    kept = load_profile(out / "device_profile.toml")
    assert (kept.parallelism, kept.capacity_iops) == (summary["device_profile"]["parallelism"],
                                                      summary["device_profile"]["capacity_iops"])
    assert kept.at_rest is not None and kept.burst, "the measurements the prediction used are in it"
    # Bursts of each op, random and sequential.
    assert sorted((b.op, b.pattern) for b in kept.burst) == [
        (op, pat) for op in ("read", "write") for pat in ("random", "sequential")]
    assert kept.direct_reads == (None if device == "file" else reads or "threads")
    # The requests at rest at the other spacings too, reads and writes.
    assert sorted((p.op, p.spacing_us) for p in kept.at_rest_idle or []) == [
        (op, sp) for op in ("read", "write") for sp in (250, 500, 1_000, 10_000, 50_000)]
    assert kept.path_at_rest_us() == [tuple(x) for x in summary["device_profile"]["path_at_rest_us"]]
    profile = {k: summary["device_profile"][k] for k in ("capacity_iops", "parallelism", "op_time_us")}
    rest = dict(summary["device_profile"]["path_at_rest_us"])
    # After each replay the device's time at rest was measured again (the calibration's
    # lone reads), beside the profile's own: the same measurement minutes apart.
    assert kept.at_rest is not None
    base = summary["device_profile"]["rest_p50_us"]
    assert base == pytest.approx(kept.at_rest.percentile_us(50))
    again = {run: s["rest_p50_us"] for run, s in summary["replays"].items()}
    assert again.keys() == {"fcfs"} and all(0.2 < us / base < 5 for us in again.values()), (again, base)
    assert ("The device at rest (lone 4 KiB reads 2 ms apart, p50) after each replay: fcfs "
            f"{again['fcfs']:,.0f} µs") in (out / "report.html").read_text()
    assert ((ratio > 0.4) & (ratio < 2.5)).all(), (
        t.select("name", "p50_ns_pred", "p50_ns_meas", "p99_ns_pred", "p99_ns_meas").to_dicts(), profile,
        {"path_at_rest_p50_us": rest.get(0.5), "replays": summary["replays"]})


@pytest.mark.untimed
def test_bad_input_is_one_line(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    assert_one_line_error(run_cli("validate", str(exp), "--device-profile", str(exp)), "--live-device file or direct")
    assert_one_line_error(run_cli("validate", str(exp), "--live-device", "disk"), "emulated, file, direct")
    assert_one_line_error(run_cli("validate", str(exp), "--live-device", "direct", "--direct-reads", "aio"),
                          "--direct-reads", "expected one of threads, io_uring, got 'aio'")
    assert_one_line_error(run_cli("validate", str(exp), "--live-device", "file", "--direct-reads", "io_uring"),
                          "--direct-reads", "io_uring reads direct files: give --live-device direct too")
    assert_one_line_error(run_cli("validate", str(exp), "--live-device", "file", "--calibration-passes", "0"),
                          "--calibration-passes", "1..9, got 0")
    for bad in ("0", "10"):
        assert_one_line_error(run_cli("validate", str(exp), "--repeats", bad, "--out", str(tmp_path / "o")),
                              "--repeats", f"must be in 1..9, got {bad}")
    for bad in ("0", "nan", "100"):
        assert_one_line_error(run_cli("validate", str(exp), "--live-device", "file", "--calibration-time", bad),
                              "--calibration-time", f"0.05 to 60 s, got {bad}")
    # Calibration settings where nothing is calibrated were ignored (the emulated device
    # ran a whole validation with them).
    assert_one_line_error(run_cli("validate", str(exp), "--calibration-time", "1", "--out", str(tmp_path / "o")),
                          "--calibration-time: only real files are calibrated")
    assert_one_line_error(run_cli("validate", str(exp), "--live-device", "file", "--device-profile", str(exp),
                                  "--calibration-passes", "2", "--out", str(tmp_path / "o")),
                          "--calibration-passes: with --device-profile nothing is calibrated")
    closed = tmp_path / "closed.toml"
    closed.write_text(EXPERIMENT.format(trace=bundled("websearch")).replace('[[policy]]\nkind = "wf2q"\nweights = [2, 1, 1]\n', "")
                      + '\n[[tenant]]\nname = "backup"\nclosed = { outstanding = 4, size = "64k" }\n')
    assert_one_line_error(run_cli("validate", str(closed), "--out", str(tmp_path / "o")), "closed-loop", "backup")
    array = tmp_path / "array.toml"
    array.write_text(EXPERIMENT.format(trace=bundled("websearch")).replace('kind = "constant"', 'kind = "exponential"'))
    assert_one_line_error(run_cli("validate", str(array), "--out", str(tmp_path / "o")), "constant-rate device only")
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.untimed
@pytest.mark.parametrize(("bad", "said"), [("0", "must be > 0"), ("12", "at least 1 MiB"), ("big", "size")])
def test_export_size_is_checked(tmp_path: Path, bad: str, said: str) -> None:
    assert_one_line_error(run_cli("validate", str(_experiment(tmp_path)), "--export-size", bad,
                                  "--out", str(tmp_path / "o")), "--export-size", said)


@pytest.mark.untimed
def test_a_profile_measured_with_the_cpus_the_other_way_is_warned_of(tmp_path: Path) -> None:
    """A profile measured with the CPUs kept awake, replays that leave them free: a
    warning line before the run (which then stops on its closed-loop tenant, one line)."""
    from storqos.model.device_profile import dump_profile
    from test_validate_burst import _profile

    prof = tmp_path / "awake.toml"
    prof.write_text(dump_profile(_profile(None).model_copy(update={"cpus_awake": True})))
    closed = tmp_path / "closed.toml"
    closed.write_text(EXPERIMENT.format(trace=bundled("websearch")).replace('[[policy]]\nkind = "wf2q"\nweights = [2, 1, 1]\n', "")
                      + '\n[[tenant]]\nname = "backup"\nclosed = { outstanding = 4, size = "64k" }\n')
    r = run_cli("validate", str(closed), "--live-device", "file", "--device-profile", str(prof), "--awake-cpus", "no",
                "--export-size", "1MiB", "--out", str(tmp_path / "o"))
    assert r.code == 2 and "Traceback" not in r.err, r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith("warning:") and "closed-loop" in lines[1], r.err
    assert "measured with the CPUs awake" in lines[0] and "free to sleep" in lines[0], lines[0]


@pytest.mark.untimed
@pytest.mark.parametrize(("measured_direct", "device", "said"), [
    (False, "direct", "measured through the page cache and the live files are served past it"),
    (True, "file", "measured past the page cache and the live files are served through it")])
def test_a_profile_of_the_other_cache_mode_is_warned_of(tmp_path: Path, measured_direct: bool, device: str,
                                                        said: str) -> None:
    """A profile of a page-cached file given to a direct validation (or the other way
    round): a warning line before the run."""
    from storqos.model.device_profile import dump_profile
    from test_validate_burst import _profile

    prof = tmp_path / "p.toml"
    prof.write_text(dump_profile(_profile(None).model_copy(update={"direct": measured_direct})))
    closed = tmp_path / "closed.toml"
    closed.write_text(EXPERIMENT.format(trace=bundled("websearch")).replace('[[policy]]\nkind = "wf2q"\nweights = [2, 1, 1]\n', "")
                      + '\n[[tenant]]\nname = "backup"\nclosed = { outstanding = 4, size = "64k" }\n')
    r = run_cli("validate", str(closed), "--live-device", device, "--device-profile", str(prof),
                "--export-size", "1MiB", "--out", str(tmp_path / "o"))
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and lines[0].startswith("warning:") and said in lines[0], r.err
    assert f"--live-device {'file' if device == 'direct' else 'direct'}" in lines[0]


@pytest.mark.untimed
def test_a_profile_of_the_other_direct_reads_is_warned_of(tmp_path: Path) -> None:
    """A profile measured through a gateway reading with io_uring, given to a validation
    whose gateway reads on its threads: a warning line before the run."""
    from storqos.model.device_profile import dump_profile
    from test_validate_burst import _profile

    prof = tmp_path / "p.toml"
    prof.write_text(dump_profile(_profile(None).model_copy(update={"direct": True, "direct_reads": "io_uring"})))
    closed = tmp_path / "closed.toml"
    closed.write_text(EXPERIMENT.format(trace=bundled("websearch")).replace('[[policy]]\nkind = "wf2q"\nweights = [2, 1, 1]\n', "")
                      + '\n[[tenant]]\nname = "backup"\nclosed = { outstanding = 4, size = "64k" }\n')
    r = run_cli("validate", str(closed), "--live-device", "direct", "--device-profile", str(prof),
                "--export-size", "1MiB", "--out", str(tmp_path / "o"))
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and lines[0].startswith("warning:"), r.err
    assert "reading with io_uring and the live one reads with threads" in lines[0], lines[0]
    assert "--direct-reads io_uring" in lines[0], lines[0]


def test_exports_are_read_through_before_a_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every byte of every export is read (the page cache then holds it), with the
    kernel told first that the whole file is wanted."""
    import os

    from storqos.live import validation_files as v

    sizes = {"t0.img": (9 << 20) + 123, "t1.img": 4096}
    for name, n in sizes.items():
        (tmp_path / name).write_bytes(os.urandom(n))
    advised: list[tuple[int, int, int]] = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, how: (advised.append((off, n, how)), real(fd, off, n, how))[1])
    read: dict[str, int] = {}
    opened = open

    class Counting:
        def __init__(self, f: object, name: str) -> None:
            self.f, self.name = f, name

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()  # type: ignore[attr-defined]

        def fileno(self) -> int:
            return self.f.fileno()  # type: ignore[attr-defined,no-any-return]

        def read(self, n: int) -> bytes:
            b: bytes = self.f.read(n)  # type: ignore[attr-defined]
            read[self.name] = read.get(self.name, 0) + len(b)
            return b

    monkeypatch.setattr(v, "open", lambda p, *a, **k: Counting(opened(p, *a, **k), Path(p).name), raising=False)
    v.into_page_cache([tmp_path / name for name in sizes])
    assert read == sizes
    assert advised == [(0, 0, os.POSIX_FADV_WILLNEED)] * 2


@pytest.mark.untimed
def test_a_replay_the_host_disturbed_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host took 8 % of the machine's CPU time during the first replay (a stand-in
    for the kernel's count; 1 % is the bound), 0.5 % during the second: the second is
    kept, after one line saying why the first was made again. Three disturbed replays:
    the one on schedule with the fewest late requests is kept."""
    import os

    import numpy as np
    from storqos.live import validate as v
    from storqos.live.replay import ReplayResult

    cpu_ms = 2_000 * (os.cpu_count() or 1)  # 2 s on every CPU

    def result(steal_share: float, late: int) -> ReplayResult:
        err = np.zeros(10_000, dtype=np.int64)
        err[:late] = 2_000_000
        return ReplayResult(requests=pl.DataFrame(), issue_error_ns=err, errors={}, first_error=None, span_s=2.0,
                            scheduled_span_s=2.0, export_bytes={0: 1 << 20}, mode="open",
                            steal_ms=steal_share * cpu_ms)

    monkeypatch.setattr(v, "GatewayProcess", NoGateway)
    said: list[str] = []
    made = iter([result(0.08, 10), result(0.005, 30)])
    events: list[str] = []

    def replayed(*a: object, **k: object) -> ReplayResult:
        events.append("replay")
        return next(made)

    monkeypatch.setattr(v, "replay", replayed)
    monkeypatch.setattr(v, "_into_page_cache", lambda paths: events.append(f"warm {[p.name for p in paths]}"))
    files = [Path("t0.img"), Path("t1.img")]
    live, attempts = v._replay_on_schedule(pl.DataFrame(), {}, 1, 3, said.append, "fcfs", "no", files)
    assert attempts == 2 and live.late == 30 and live.disturbed() is None
    # Every replay finds the exports just read into the page cache.
    assert events == ["warm ['t0.img', 't1.img']", "replay"] * 2, events
    assert len(said) == 1 and said[0].startswith(f"fcfs: the host took {0.08 * cpu_ms:,.0f} ms of CPU time"), said
    assert "(8.0 % of it); replaying again (2/3)" in said[0], said
    # All three disturbed: one behind (150 late of 10,000 is 1.5 %), two busy hosts; the
    # busy ones kept time, and of them the fewer late requests wins.
    made = iter([result(0.0, 150), result(0.05, 40), result(0.03, 20)])
    said.clear()
    live, attempts = v._replay_on_schedule(pl.DataFrame(), {}, 1, 3, said.append, "wf2q", "no", [])
    assert attempts == 3 and live.late == 20 and len(said) == 2
    assert "fell behind the trace" in said[0] and "(5.0 % of it)" in said[1], said


@pytest.mark.untimed
def test_the_device_at_rest_after_each_replay_is_reported_beside_the_profiles() -> None:
    """The report's line on the device's drift: each run's p50 at rest after its replay
    and its difference from the profile's p50 of the same reads (here 200 µs, read off
    the profile's percentiles between 40 and 60), as the markdown and the HTML page
    show it (the live test finds it in the page); nothing for an emulated device."""
    from storqos.live.validate import RunValidation, Validation
    from storqos.live.validation_report import rest_line
    from storqos.model.device_profile import ServicePoint

    def point(pcts: list[tuple[float, float]]) -> ServicePoint:
        return ServicePoint(op="read", pattern="random", size=4096, iops=1e4, mean_us=100, min_us=50,
                            percentiles_us=pcts)

    prof = _lone_read_profile(direct=True, capacity_iops=10_000, parallelism=1,
                              service=[point([(50.0, 100.0), (99.0, 150.0)])],
                              at_rest=point([(40.0, 150.0), (60.0, 250.0), (99.0, 400.0)]))
    empty = pl.DataFrame({"tenant": [0], "name": ["a"], "requests": [1]})

    def run(label: str, rest: float | None) -> RunValidation:
        return RunValidation(label=label, policy=label, point={}, tenants=empty, predicted=pl.DataFrame(),
                             measured=pl.DataFrame(), schedule={}, fell_behind=None, errors=0, rest_p50_us=rest)

    v = Validation(name="x", mode="direct", device="d", runs=[run("fcfs", 250.0), run("mclock", 180.0)], profile=prof)
    assert v.profile_rest_p50_us() == pytest.approx(200.0)
    assert v.rest_drift() == [("fcfs", 250.0, pytest.approx(0.25)), ("mclock", 180.0, pytest.approx(-0.10))]
    line = ("The device at rest (lone 4 KiB reads 2 ms apart, p50) after each replay: fcfs 250 µs (+25%), "
            "mclock 180 µs (-10%); the profile's 200 µs.")
    assert rest_line(v) == line
    emulated = Validation(name="x", mode="emulated", device="d", runs=[run("fcfs", None)])
    assert rest_line(emulated) == ""


def _lone_read_profile(**fields: object) -> DeviceProfile:
    """A profile of one measured class (4 KiB random reads, 100 µs) and one depth, with
    ``fields`` set."""
    from storqos.model.device_profile import DepthPoint, ServicePoint

    point = ServicePoint(op="read", pattern="random", size=4096, iops=1e4, mean_us=100, min_us=50,
                         percentiles_us=[(50.0, 100.0)])
    return DeviceProfile.model_validate({
        "version": 1, "storqos_version": "t", "target": "t", "engine": "replay", "created": "t",
        "time_per_point_s": 1, "op_time_us": 100, "bandwidth_bytes_per_s": 1e9, "service": [point],
        "queue_depth": [DepthPoint(qd=1, iops=10_000, mean_us=100, p50_us=100, p99_us=100)], **fields})


@pytest.mark.untimed
def test_a_calibration_the_host_disturbed_is_made_again(monkeypatch: pytest.MonkeyPatch,
                                                         recwarn: pytest.WarningsRecorder) -> None:
    """The host took 16 % of the machine's CPU time during the first calibration (as in
    a fresh `make test` whose page-cached profile then predicted 3x the live p50), 0.5 %
    during the second: the second is kept, after one line saying why, and nothing is
    warned. All three over the 5 % that calls for another (12 %, 6 %, 9 %): the least
    disturbed is kept, and the warning says how much the host took while it was
    measured. 3 % is not enough to measure again, but is warned of."""
    import os

    from storqos.live import calibrate as c
    from storqos.live import validation_calibration as v
    measured_s = 25.0
    cpu_ms = measured_s * 1e3 * (os.cpu_count() or 1)
    base = _lone_read_profile(direct=False, capacity_iops=10_000, parallelism=1, measured_s=measured_s)

    made: list[float] = []
    shares = iter([0.16, 0.005])

    def measured(*a: object, **k: object) -> DeviceProfile:
        assert k["warn_busy"] is False, "the kept profile is warned of, not every attempt"
        assert k["bursts"] is False, "the bursts are measured through a gateway of the profile's depth"
        share = next(shares)
        made.append(share)
        return base.model_copy(update={"steal_ms": share * cpu_ms, "op_time_us": 100 + 1000 * share})

    monkeypatch.setattr(v, "GatewayProcess", NoGateway)
    monkeypatch.setattr(c, "calibrate", measured)
    at_depth: list[DeviceProfile] = []  # the kept profile only, once kept
    monkeypatch.setattr(v, "bursts_at_depth", lambda prof, *a, **k: at_depth.append(prof) or prof)
    said: list[str] = []
    kept = v.calibrate_file(Path("cal.img"), passes=1, direct=True, attempts=3, progress=said.append)
    assert [p.op_time_us for p in at_depth] == [pytest.approx(105)]
    assert made == [0.16, 0.005] and kept.op_time_us == pytest.approx(105) and kept.direct
    again = [s for s in said if "calibrating again" in s]
    assert again == [f"calibrating: the host took {0.16 * cpu_ms:,.0f} ms of CPU time from this machine meanwhile "
                     "(16.0 % of it): a profile measured so comes out slower than the device; calibrating again "
                     "(2/3)"], said
    assert not recwarn.list, [str(w.message) for w in recwarn.list]
    # Every attempt disturbed: the least disturbed kept, and warned of.
    made.clear()
    shares = iter([0.12, 0.06, 0.09])
    kept = v.calibrate_file(Path("cal.img"), passes=1, attempts=3, progress=said.append)
    assert made == [0.12, 0.06, 0.09] and kept.op_time_us == pytest.approx(160)
    warned = [str(w.message) for w in recwarn.list]
    assert len(warned) == 1 and warned[0].startswith(
        f"the host took {0.06 * cpu_ms:,.0f} ms of CPU time from this machine meanwhile (6.0 % of it): a profile "
        "measured while the host is busy may come out slower than the device"), warned
    recwarn.clear()
    made.clear()
    shares = iter([0.03])
    v.calibrate_file(Path("cal.img"), passes=1, attempts=3)
    assert made == [0.03] and len(recwarn.list) == 1 and "(3.0 % of it)" in str(recwarn.list[0].message)
    recwarn.clear()
    # One attempt asked for: one calibration, however disturbed.
    made.clear()
    shares = iter([0.2])
    v.calibrate_file(Path("cal.img"), passes=1, attempts=1)
    assert made == [0.2] and len(recwarn.list) == 1


def test_bursts_are_measured_through_a_gateway_of_the_profiles_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    """A validation's gateways serve at the profile's parallelism k, the calibration's
    at the gateway's default depth (8): the bursts, which say how fast the path drains a
    queue, are measured through a FCFS gateway of depth k in front of the same file, for
    each op and pattern the profile measured, ``passes`` times each, the median of the
    passes kept and the depth recorded; one burst every 10 ms, or 3 × 32 × the class's
    smallest requests' mean time when that is longer."""
    from storqos.live import calibrate as c
    from storqos.live import replay as r
    from storqos.live import validation_calibration as v
    from storqos.model.device_profile import BurstPoint, ServicePoint

    def burst(op: str, pattern: str, finish_us: float) -> BurstPoint:
        return BurstPoint(op=op, pattern=pattern, requests=32, bursts=28, period_us=10_000, issue_us=18,  # type: ignore[arg-type]
                          finish_us=finish_us, response_us=[600.0, 500.0])

    def writes(size: int, mean_us: float) -> ServicePoint:
        return ServicePoint(op="write", pattern="sequential", size=size, iops=1e4, mean_us=mean_us, min_us=50,
                            percentiles_us=[(50.0, mean_us)])

    base = _lone_read_profile(direct=True, capacity_iops=40_000, parallelism=4)  # 4 KiB random reads, 100 µs
    base = base.model_copy(update={"service": [writes(65536, 400.0), *base.service, writes(4096, 120.0)]})
    depths: list[object] = []

    class Gateway(NoGateway):
        def __init__(self, cfg: dict[str, object]) -> None:
            depths.append(cfg["depth"])
            assert cfg["policy"] == {"kind": "fcfs"} and cfg["exports"] == [
                {"name": "cal", "path": "cal.img", "tenant": 0, "direct": True}], cfg

    # Through 4 slots the replies come further apart, and differ from pass to pass.
    measured = iter([31.0, 35.0, 33.0, 28.0, 26.0, 40.0])
    asked: list[tuple[str, str, int, float]] = []

    def through(uri: str, export_bytes: int, op: str, *, seed: int, period_us: float, pattern: str) -> BurstPoint:
        assert export_bytes == 256 << 20
        asked.append((op, pattern, seed, period_us))
        return burst(op, pattern, next(measured))

    monkeypatch.setattr(v, "GatewayProcess", Gateway)
    monkeypatch.setattr(c, "burst_point", through)
    monkeypatch.setattr(r, "export_size", lambda uri, where: 256 << 20)
    got = v.bursts_at_depth(base, Path("cal.img"), direct=True, passes=3)
    assert depths == [4]
    assert [(op, pat, period) for op, pat, _, period in asked] == (
        [("read", "random", 10_000)] * 3 + [("write", "sequential", 3 * 32 * 120.0)] * 3)
    assert len({seed for _, _, seed, _ in asked}) == 6
    assert got.burst_depth == 4 and got.burst is not None
    assert [(b.op, b.pattern, b.finish_us) for b in got.burst] == [("read", "random", 33.0),
                                                                    ("write", "sequential", 28.0)]
    assert got.model_copy(update={"burst": None, "burst_depth": None}) == base
    # A profile of 8 servers: through 8 slots, the depth its validation serves at.
    depths.clear()
    measured = iter([20.0] * 6)
    assert v.bursts_at_depth(base.model_copy(update={"parallelism": 8}), Path("cal.img"), direct=True,
                             passes=3).burst_depth == 8
    assert depths == [8]


@pytest.mark.untimed
def test_repeated_replays_are_taken_in_turn_and_their_medians_reported(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`--repeats 3`: the two policies are replayed in turn (fcfs, wf2q, fcfs, …), and
    each tenant's live p50 is the median of its three replays' (here every response of
    a tenant in a replay takes one time, so a replay's p50 is that time); the request
    log shown is the replay whose p50 over all requests is the median; the report says
    how far the p50s spread (half the range over the median)."""
    import statistics

    import numpy as np
    from storqos.experiments.experiment import load
    from storqos.live import validate as v
    from storqos.live.replay import ReplayResult
    from storqos.live.validation_report import cdf_figure, markdown, spread_line

    # µs per (replay, tenant), per policy: fcfs's disk/1 moves most (400 → 100..500).
    times = {"fcfs": [[300, 400, 200], [330, 100, 210], [270, 500, 190]],
             "wf2q": [[100, 100, 100], [110, 120, 100], [90, 80, 100]]}
    order: list[str] = []

    def replayed(df: pl.DataFrame, uris: object, **k: object) -> ReplayResult:
        label = "fcfs" if order.count("fcfs") == order.count("wf2q") else "wf2q"
        us = times[label][order.count(label)]
        order.append(label)
        t = df["tenant"].to_numpy()
        arrival = df["arrival_ns"].to_numpy().astype(np.int64)
        response = np.array([us[int(x)] * 1000 for x in t], dtype=np.int64)
        log = df.select("tenant", "is_read", "offset", "size").with_columns(
            pl.Series("arrival_ns", arrival).cast(pl.UInt64), pl.Series("response_ns", response).cast(pl.UInt64),
            pl.Series("finish_ns", arrival + response).cast(pl.UInt64))
        return ReplayResult(requests=log, issue_error_ns=np.zeros(df.height, dtype=np.int64), errors={},
                            first_error=None, span_s=4.0, scheduled_span_s=4.0, export_bytes={0: 1 << 20},
                            mode="open", steal_ms=0.0)

    monkeypatch.setattr(v, "GatewayProcess", NoGateway)
    monkeypatch.setattr(v, "replay", replayed)
    said: list[str] = []
    res = v.validate(load(_experiment(tmp_path)), repeats=3, workdir=tmp_path, progress=said.append)
    assert order == ["fcfs", "wf2q"] * 3
    assert [m for m in said if "replaying" in m][:3] == [
        f"{lab}: replaying {n:,} requests live ({i}/2) (replay {k} of 3)"
        for lab, i, k, n in (("fcfs", 1, 1, res.runs[0].predicted.height), ("wf2q", 2, 1, res.runs[1].predicted.height),
                             ("fcfs", 1, 2, res.runs[0].predicted.height))]
    t = res.table()
    for run in res.runs:
        assert run.repeats == 3 and run.attempts == 3 and len(run.replays) == 3
        for tenant in range(3):
            row = t.filter((pl.col("run") == run.label) & (pl.col("tenant") == tenant)).to_dicts()[0]
            per_replay = [times[run.label][k][tenant] * 1000 for k in range(3)]
            assert row["p50_ns_meas"] == pytest.approx(statistics.median(per_replay))
            assert row["p99_ns_meas"] == pytest.approx(statistics.median(per_replay))
    # fcfs's replays' p50s over all requests: 300, 210 and 270 µs (tenants' shares aside,
    # the middle replay is the third); its log is the one shown.
    overall = [float(np.median(log["response_ns"].to_numpy())) for log in res.runs[0].replays]
    middle = sorted(range(3), key=lambda k: overall[k])[1]
    assert res.runs[0].measured.equals(res.runs[0].replays[middle])
    spread = res.runs[0].spread(50)
    assert spread["p50_spread"].to_list() == pytest.approx([(330 - 270) / 2 / 300, (500 - 100) / 2 / 400,
                                                            (210 - 190) / 2 / 200])
    line = spread_line(res)
    assert "medians over 3 replays" in line and "±50.0 % at most" in line, line
    assert line in markdown(res)
    # The CDF figure draws the two replays not shown beside the one shown: per tenant,
    # each at the one time its requests took in that replay.
    fig = cdf_figure(res, 0)
    others = [k for k in range(3) if k != middle]
    for tenant in range(3):
        drawn = [tr for tr in fig.data if tr.xaxis == ("x" if tenant == 0 else f"x{tenant + 1}")]
        assert [tr.name for tr in drawn] == ["other replays", "other replays", "predicted", "measured"]
        for tr, k in zip(drawn[:2], others, strict=True):
            assert set(tr.x) == {times["fcfs"][k][tenant] / 1000}
        assert set(drawn[3].x) == {times["fcfs"][middle][tenant] / 1000}
    assert [tr.showlegend for tr in fig.data[:4]] == [True, False, True, True]
    order.clear()
    one = v.validate(load(_experiment(tmp_path)), repeats=1, workdir=tmp_path)
    assert spread_line(one) == "" and all(r.repeats == 1 and len(r.replays) == 1 for r in one.runs)
    assert [tr.name for tr in cdf_figure(one, 0).data][:2] == ["predicted", "measured"]


@pytest.mark.untimed
def test_the_terminal_table_gives_the_p50_and_p99_differences_in_80_columns() -> None:
    """On real files the target is the p50, on the emulated device the p99: the terminal
    shows both differences (live / predicted − 1), each run on a row of its own above its
    tenants, within 80 columns even for long tenant names."""
    from rich.console import Console
    from storqos.cli.commands.validate import _table

    rows = [("fcfs", 0, "mail/swapper", 300e3, 270e3, 1.0e6, 0.85e6), ("fcfs", 1, "mail/kjournald", 500e3, 600e3, 1.4e6, 2.8e6),
            ("mclock", 0, "mail/swapper", 300e3, 330e3, 1.0e6, 1.1e6)]
    t = pl.DataFrame([{"run": r, "tenant": k, "name": n, "p50_ns_pred": a, "p50_ns_meas": b, "p99_ns_pred": c,
                       "p99_ns_meas": d, "iops_err": 0.0, "p50_err": b / a - 1, "p99_err": d / c - 1}
                      for r, k, n, a, b, c, d in rows])
    con = Console(width=80, record=True, emoji=False, markup=False)
    con.print(_table("fiu_mail: predicted vs live (direct-I/O files, profile of nbd://127.0.0.1:1/cal)", t))
    lines = con.export_text().splitlines()
    assert all(len(ln) <= 80 for ln in lines), lines
    cells = [ln.split() for ln in lines]
    assert ["fcfs"] in cells and ["mclock"] in cells
    assert ["mail/swapper", "+0.0%", "0.3", "0.27", "-10.0%", "1", "0.85", "-15.0%"] in cells
    assert ["mail/kjournald", "+0.0%", "0.5", "0.6", "+20.0%", "1.4", "2.8", "+100.0%"] in cells
    assert ["mail/swapper", "+0.0%", "0.3", "0.33", "+10.0%", "1", "1.1", "+10.0%"] in cells
