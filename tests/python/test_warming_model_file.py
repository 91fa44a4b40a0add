"""A learned day model written by `storqos warm --save` reads back as the same model
(the same classes, durations and predictions), and a wrong file is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import HIGH, DayModel
from storqos.planning.warming.model_file import MODEL_FORMAT, load_model
from test_warming_counts import _btf, _days


def test_warm_save_writes_the_model_and_it_reads_back_the_same(tmp_path: Path) -> None:
    path = _btf(tmp_path, _days(14))
    model = tmp_path / "model.toml"
    r = run_cli("warm", str(path), "--train-days", "10", "--save", str(model), "--json")
    assert r.code == 0, r.err
    m = load_model(model)
    from storqos.planning.warming.counts import detect_counts, from_counts, read_counts

    fmt = detect_counts(path)
    assert fmt is not None
    fresh = DayModel.fit(from_counts(read_counts(path, fmt)), range(10))
    assert m.threshold == pytest.approx(fresh.threshold) and m.labels == fresh.labels
    assert len(m.periods) == len(fresh.periods) and (m.state_counts == fresh.state_counts).all()
    # Weekdays High 08:00-18:00 (600 min): a High begun at 08:00 and 60 min old has about
    # 540 min to go in both; a Low begun at 18:00 and 5 min old, the night's.
    for state, start, elapsed in ((HIGH, 8 * 60, 60), (1 - HIGH, 18 * 60, 5)):
        c = m.labels[0]
        assert m.residual(state, c, start, elapsed) == fresh.residual(state, c, start, elapsed)
    assert abs(m.residual(HIGH, m.labels[0], 8 * 60, 60) - 540) <= 31
    assert np.allclose(m.centroids, fresh.centroids)


def test_a_wrong_model_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "m.toml"
    bad.write_text('format = "something"\n')
    with pytest.raises(InputError, match="not a storqos day model"):
        load_model(bad)
    bad.write_text(f'format = "{MODEL_FORMAT}"\nversion = 9\n')
    with pytest.raises(InputError, match="a day model of version 9"):
        load_model(bad)
    path = _btf(tmp_path, _days(9))
    good = tmp_path / "good.toml"
    assert run_cli("warm", str(path), "--train-days", "7", "--save", str(good), "--json").code == 0
    text = good.read_text()
    bad.write_text(text.replace("threshold_per_min = ", "threshold_per_min = -"))
    with pytest.raises(InputError, match="threshold_per_min must be > 0"):
        load_model(bad)
    cut = text.split("per_min = [")[0] + "per_min = [1.0, 2.0]\n"
    bad.write_text(cut)
    with pytest.raises(InputError, match="per_min: 7 days of 1440 counts"):
        load_model(bad)
    r = run_cli("warm", str(path), "--train-days", "7", "--save", str(tmp_path / "no" / "m.toml"))
    assert_one_line_error(r, "cannot write the model", "no/m.toml")
