"""Long commands say how long: progress goes to stderr (stdout is the result's), first
what the command will do and about how long it takes, then one line per stage off a
terminal (a rich bar on one); a calibration of 117 points is one stage, not 117 lines."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from rich.console import Console
from storqos.base.progress import Lines, Stages, about, clock
from storqos.experiments.experiment import load
from storqos.live import calibrate as c
from storqos.live import validate as v
from storqos.live import validation_calibration as vc
from storqos.model.device_profile import DeviceProfile
from storqos.traces import bundled
from test_validate import EXPERIMENT, NoGateway, _lone_read_profile

STAGE = re.compile(r"^\[\d+:\d\d\] ")


def test_about_and_clock() -> None:
    assert [about(s) for s in (3, 12, 42, 89, 95, 420, 5400)] == [
        "about 5 s", "about 10 s", "about 40 s", "about 90 s", "about 2 min", "about 7 min", "about 1.5 h"]
    assert [clock(s) for s in (0, 65.9, 3725)] == ["0:00", "1:05", "1:02:05"]


def test_off_a_terminal_one_line_per_stage(capsys: pytest.CaptureFixture[str]) -> None:
    with Stages("validate") as st:
        st.begin("2 policies × 1 replay", 420.0, 900.0)
        st.stage("fcfs: replaying", 200.0)
        for i in range(1000):
            st.step(i, 1000)  # steps are not lines
        st.stage("wf2q: replaying", 200.0)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == "validate: 2 policies × 1 replay, about 7 min (up to 15 min if measurements are made again)"
    assert [STAGE.sub("", ln) for ln in lines[1:3]] == ["fcfs: replaying", "wf2q: replaying"]
    assert all(STAGE.match(ln) for ln in lines[1:3])
    assert re.fullmatch(r"validate: done in 0:0\d \(expected about 7 min\)", lines[3]) and len(lines) == 4


def test_on_a_terminal_a_bar_and_the_lines_kept() -> None:
    """On a terminal the stages are a bar's; a measurement made again is said above it."""
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100, color_system=None)
    with Stages("validate", console=console) as st:
        st.begin("1 policy × 1 replay", 30.0)
        st.stage("fcfs: replaying", 30.0)
        st.step(500, 1000)
        st.stage("fcfs: it fell behind; replaying again (2/3)", 30.0, keep=True)
    text = buf.getvalue()
    assert "validate: 1 policy × 1 replay, about 30 s" in text
    assert "fcfs: it fell behind; replaying again (2/3)" in text
    kept = [ln for ln in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", text).splitlines() if STAGE.match(ln.strip())]
    assert [STAGE.sub("", ln.strip()) for ln in kept] == ["fcfs: it fell behind; replaying again (2/3)"]


def test_a_calibration_is_one_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """validate's calibration measured 117 points and printed a line for each."""
    base = _lone_read_profile(direct=True, capacity_iops=10_000, parallelism=4, measured_s=25.0)
    steps: list[tuple[int, int]] = []

    def measured(*a: object, progress: object = None, **k: object) -> DeviceProfile:
        assert callable(progress)
        for i in range(118):
            progress(i, 117, "a point")
        return base

    class Sink(Lines):
        def step(self, done: int, total: int) -> None:
            steps.append((done, total))

    monkeypatch.setattr(vc, "GatewayProcess", NoGateway)
    monkeypatch.setattr(c, "calibrate", measured)
    monkeypatch.setattr(vc, "bursts_at_depth", lambda prof, *a, **k: prof)
    said: list[str] = []
    vc.calibrate_file(Path("cal.img"), passes=3, attempts=1, progress=Sink(said.append))
    plan = v.calibration_plan()
    assert said == [f"calibrating: 3 passes of {plan.points} points through a gateway, as the replays will find "
                    "the file"]
    assert plan.points * 3 == 117 and len(steps) == 118 and steps[-1] == (117, 117)


def test_the_estimate_follows_the_experiment(tmp_path: Path) -> None:
    """Emulated: the replays at the trace's times (4 s each), 2 policies × 3 replays; on
    real files the calibration first, three passes of about 30 s on this machine's kind
    (docs/validation.md), and the exports written."""
    p = tmp_path / "exp.toml"
    p.write_text(EXPERIMENT.format(trace=bundled("websearch")))
    exp = load(p)
    requests = [v._requests(exp, run) for run in exp.runs]
    emulated = v.Estimate(exp, requests, "emulated", calibrating=False, repeats=3, passes=3, seconds=0.5,
                           export_bytes=256 << 20, tenants=3)
    assert emulated.plan() == "2 policies × 3 replays of 3.99 s each on an emulated device"
    assert 2 * 3 * 4.0 <= emulated.total() <= 2 * 3 * 4.0 + 3
    assert emulated.total(3) == pytest.approx(3 * emulated.total(), rel=0.02)
    direct = v.Estimate(exp, requests, "direct", calibrating=True, repeats=1, passes=3, seconds=0.5,
                         export_bytes=256 << 20, tenants=3)
    assert direct.plan().endswith("on direct-I/O files, calibrated first")
    assert 3 * 20 <= direct.calibrate_s <= 3 * 40, direct.calibrate_s
    assert direct.total() > direct.calibrate_s + 2 * 4.0 + 3 * (1 << 28) / 1e9


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_calibrate_says_its_plan_and_a_line_per_pass(tmp_path: Path) -> None:
    target = tmp_path / "disk.img"
    with open(target, "wb") as f:
        f.truncate(64 << 20)
    r = run_cli("calibrate", str(target), "--sizes", "4k,8k", "--queue-depths", "1,2", "--time", "0.2", "--passes",
                "2", "--out", str(tmp_path / "p.toml"))
    assert r.code == 0, r.err
    assert not STAGE.search(r.out) and "pass 1" not in r.out
    lines = [ln for ln in r.err.splitlines() if not ln.startswith("warning:")]
    # 2 sizes × random and sequential + 2 depths + the reads at rest: 7 points, measured
    # 2 × (6 × 0.2 s + 1 s at rest) = 4.4 s.
    m = re.fullmatch(rf"calibrate: {re.escape(str(target))}: 2 passes of 7 points of 0.2 s, about (\d+) s", lines[0])
    assert m and 5 <= int(m.group(1)) <= 15, lines
    assert [STAGE.sub("", ln) for ln in lines[1:3]] == ["pass 1 of 2: 7 points", "pass 2 of 2: 7 points"]
    assert lines[3].startswith("calibrate: done in ") and len(lines) == 4, lines
