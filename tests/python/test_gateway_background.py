"""A gateway's [background] job on compressed days: a day model saved by `storqos warm
--save` (weekdays High 08:00-18:00), one interval of 10 ms standing for a minute (a day in
14.4 s), the users replayed Low, then High from 08:00 to 18:00, then Low. The job (a
scrub of its own export through the gateway) runs in the Low morning, stops before the
predicted High (by the warm-up time, 60 model minutes = 0.6 s) and not only once High is
seen, warming the users' export meanwhile, stays off through the High, and runs again
once Low is back. Bad [background]
settings are one line."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli
from storqos.live.background_job import BackgroundJob, JobSettings
from storqos.live.control_client import command
from storqos.live.replay import replay
from test_serve import Server, _image
from test_warming_counts import _btf

MiB = 1 << 20
TICK = 0.01  # seconds per model minute
HIGH_PER_MIN, LOW_PER_MIN = 20, 0.5


def _model(tmp_path: Path) -> Path:
    """A day model of 14 days: 20 requests a minute 08:00-18:00 on weekdays, 0.5 else."""
    counts = [int(30 * (HIGH_PER_MIN if d % 7 < 5 and 16 <= i < 36 else LOW_PER_MIN)) for d in range(14)
              for i in range(48)]
    out = tmp_path / "model.toml"
    r = run_cli("warm", str(_btf(tmp_path, np.asarray(counts))), "--train-days", "12", "--save", str(out), "--json")
    assert r.code == 0, r.err
    return out


def _config(tmp_path: Path, model: Path, extra: str = "") -> Path:
    users, scrub = _image(tmp_path / "users.img", 16 * MiB), _image(tmp_path / "scrub.img", 16 * MiB)
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\ncontrol = "{tmp_path / "gw.sock"}"\n'
                   '[policy]\nkind = "wf2q"\nweights = [4, 1]\n'
                   f'[background]\nexport = "scrub"\nrate = 200\ninterval = "10ms"\nt_fast = 60\n'
                   f'model = "{model}"\nstate = "day.json"\n{extra}'
                   f'[[export]]\nname = "users"\npath = "{users}"\ntenant = 0\n'
                   f'[[export]]\nname = "scrub"\npath = "{scrub}"\ntenant = 1\n')
    return cfg


def _users(start_min: float, end_min: float, seed: int = 1) -> pl.DataFrame:
    """Poisson 4 KiB reads at the day's rate, model minutes start..end, times from 0."""
    rng = np.random.default_rng(seed)
    parts = []
    for a, b, per_min in ((start_min, 480, LOW_PER_MIN), (480, 1080, HIGH_PER_MIN), (1080, end_min, LOW_PER_MIN)):
        a, b = max(a, start_min), min(b, end_min)
        if b <= a:
            continue
        n = rng.poisson(per_min * (b - a))
        parts.append(np.sort(rng.uniform(a, b, n)))
    t = (np.concatenate(parts) - start_min) * TICK * 1e9
    n = t.size
    return pl.DataFrame({"arrival_ns": t.astype(np.uint64), "tenant": np.zeros(n, np.uint32),
                         "offset": (rng.integers(0, 4096, n) * 4096).astype(np.uint64),
                         "size": np.full(n, 4096, np.uint32), "is_read": np.ones(n, bool)})


def test_the_job_runs_in_low_and_stops_before_the_predicted_high(tmp_path: Path) -> None:
    cfg = _config(tmp_path, _model(tmp_path), 'warm_export = "users"\nwarm_bytes = "1MiB"\n')
    # The job kept yesterday (a Monday) in its state file, as across a restart: it knows
    # the Low it starts in began at 18:00. Today is a Tuesday, its minute 0 1,440 model
    # minutes after the file's origin.
    day0 = [float(HIGH_PER_MIN) if 480 <= m < 1080 else LOW_PER_MIN for m in range(1440)]
    origin = time.time() - 1440 * TICK
    (tmp_path / "day.json").write_text(json.dumps({"format": "storqos-background-state", "interval_s": TICK,
                                                   "origin_unix_s": origin, "per_min": day0}))
    origin += 1440 * TICK
    s = Server("--config", str(cfg), "--metrics", "127.0.0.1:0", "--for", "60s")
    try:
        line, port = s.ready()
        metrics = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", line)
        assert metrics, line
        samples: list[tuple[float, bool]] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                b = command(tmp_path / "gw.sock", {"cmd": "stats"})["background"]
                if b is not None:  # (before the job's first report)
                    samples.append(((time.time() - origin) / TICK, bool(b["running"])))
                time.sleep(0.02)

        th = threading.Thread(target=watch)
        th.start()
        now_min = (time.time() - origin) / TICK
        res = replay(_users(now_min + 5, 1300), {0: f"nbd://127.0.0.1:{port}/users"})
        done.set()
        th.join()
        assert not res.errors
        st = command(tmp_path / "gw.sock", {"cmd": "stats"})
        b = st["background"]
        assert b["model"] and b["done"] > 0
        # Stopped at 06:49, it warmed the users' first MiB at its rate (200 IOPS) until
        # High came at 08:00: 71 model minutes, 0.71 s, about 140 of the 256 blocks.
        assert 50 <= b["warmed"] <= 256, b
        # Its progress is its reads over the 4,096 blocks of the 16 MiB scrub export.
        assert b["passes"] == b["done"] // 4096 and b["progress"] == (b["done"] % 4096) / 4096, b
        assert b["model_source"] == str(tmp_path / "model.toml") and b["model_classes"] >= 1, b
        view = run_cli("ctl", "background", "--socket", str(tmp_path / "gw.sock"))
        assert view.code == 0, view.err
        assert f"loaded from {tmp_path / 'model.toml'}" in view.out and "High above" in view.out, view.out
        read = re.search(r"progress: ([\d,]+) requests read, (\d+)% of the current pass", view.out)
        assert read and int(read[1].replace(",", "")) >= b["done"], view.out
        assert "interval(s) of 10 ms counted" in view.out, view.out
        with urllib.request.urlopen(metrics[1], timeout=5) as page:
            gauges = {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in page.read().decode().splitlines()
                                               if ln.startswith("storqos_background_"))}
        assert gauges["storqos_background_model"] == 1 and gauges["storqos_background_model_days"] == 0, gauges
        assert 0 <= gauges["storqos_background_progress_ratio"] < 1, gauges
        assert gauges["storqos_background_requests_total"] >= b["done"], gauges
        assert "storqos_background_passes_total" in gauges, gauges
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    on = lambda a, b: [r for m, r in samples if a <= m < b]  # noqa: E731
    morning, high, evening = on(120, 380), on(480 + 30, 1080 - 30), on(1080 + 60, 1280)
    flips = [(round(m), r) for (m, r), (_, q) in zip(samples[1:], samples[:-1], strict=False) if r != q]
    assert morning and sum(morning) / len(morning) >= 0.9, (flips, err)
    assert high and sum(high) / len(high) <= 0.02, high
    # Proactive: it stopped before the users came. The model's weekday night lasts 818
    # min from 18:11, so the prediction policy stops when less than the warm-up (60
    # min) is left: at 06:49, an hour and more before the High that began at 08:00.
    assert not any(on(420, 480)), flips
    assert evening and sum(evening) / len(evening) >= 0.5, evening
    assert "runs" in err and "stops (High predicted within 60 intervals)" in err


@pytest.mark.untimed
def test_a_job_started_in_the_night_knows_when_the_night_began(tmp_path: Path) -> None:
    # Started on a Monday at 00:00 with no state file: the model's nights run 18:00 to
    # 08:00 (840 min). Seen from inside, this one began at 18:00 the evening before, so
    # with the 0.1-quantile of the nights' lengths the job stops when 840 - (360 +
    # now) is within t_fast (60): at 07:00. Counted from its own start, it would have
    # believed an hour's Low left only at 13:00.
    settings = JobSettings(export="scrub", users=[0], rate_iops=1, interval_s=60, t_fast_min=60, block=4096,
                           model_path=_model(tmp_path))
    job = BackgroundJob(settings, str(tmp_path / "no.sock"), log=lambda line: None)
    running = []
    for _ in range(600):
        job.series.append(LOW_PER_MIN)
        job.decide()
        running.append(job.running)
    assert all(running[60:390]), running.index(False)
    assert not any(running[435:]), running.index(False)


@pytest.mark.untimed
def test_the_lead_before_a_predicted_high_is_the_warm_ups_time_by_default(tmp_path: Path) -> None:
    from storqos.live.background_job import DEFAULT_T_FAST, job_settings
    from storqos.live.gateway_config import load, merged

    def lead(extra: str) -> float:
        cfg = _config(tmp_path, tmp_path / "model.toml", extra)
        cfg.write_text(cfg.read_text().replace("t_fast = 60\n", ""))
        settings = load(cfg)
        assert settings.file.background is not None
        return job_settings(settings.file.background, merged(settings), tmp_path).t_fast_min

    # 1 MiB in 4 KiB reads at 200 IOPS: 1.28 s, 128 intervals of 10 ms.
    assert lead('warm_export = "users"\nwarm_bytes = "1MiB"\n') == pytest.approx(128)
    # The whole 16 MiB export: 4,096 reads, 20.48 s.
    assert lead('warm_export = "users"\n') == pytest.approx(2048)
    assert lead("") == DEFAULT_T_FAST


@pytest.mark.untimed
def test_bad_background_settings_are_one_line(tmp_path: Path) -> None:
    model = tmp_path / "m.toml"
    model.write_text('format = "storqos-day-model"\nversion = 1\n')
    cfg = _config(tmp_path, model)
    r = run_cli("serve", "--config", str(cfg), "--for", "1s")
    assert_one_line_error(r, "[background] model", "missing threshold_per_min")
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace('export = "scrub"', 'export = "nope"'))
    assert_one_line_error(run_cli("serve", "--config", str(bad), "--for", "1s"), "[background] export",
                          "no export named 'nope'")
    bad.write_text(cfg.read_text().replace('t_fast = 60', 't_fast = -1'))
    assert_one_line_error(run_cli("serve", "--config", str(bad), "--for", "1s"), "t_fast")
    bad.write_text(cfg.read_text().replace('state = "day.json"\n', 'state = "day.json"\nusers = [1]\n'))
    assert_one_line_error(run_cli("serve", "--config", str(bad), "--for", "1s"), "[background] users",
                          "the job's own tenant (1)")
