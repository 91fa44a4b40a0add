"""A learned day model (seed 002, Xue et al., ICAC'14, §3.1: the High/Low threshold, the
K-means day classes and the two Markov levels) as a TOML file: written by ``storqos warm
--save``, read back by ``storqos warm --model`` and by a gateway's ``[background]`` job.

What is stored is what the model is learned from and cannot be recomputed: the
threshold, each training day's class and weekday, the class centroids and their sizes,
the class transitions, the silhouettes, and the per-minute series. The periods and
their (class, state) transitions are recounted from the series on reading, exactly as
:meth:`DayModel.fit` counted them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from storqos.base.errors import InputError
from storqos.base.toml_schema import read_toml
from storqos.base.version import __version__ as VERSION
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.intensity import DAY_MIN

#: What a day-model file says it is.
MODEL_FORMAT = "storqos-day-model"
#: The version of its layout this storqos writes and reads.
MODEL_VERSION = 1


def dump_model(model: DayModel) -> str:
    """The model as TOML text (with a header saying what it is)."""
    import tomli_w

    doc: dict[str, Any] = {
        "format": MODEL_FORMAT, "version": MODEL_VERSION, "storqos_version": VERSION,
        "threshold_per_min": float(model.threshold), "smooth_min": int(model.smooth_min),
        "min_run_min": int(model.min_run_min), "first_day": int(model.first_day),
        "labels": [int(c) for c in model.labels], "weekdays": [int(w) for w in model.weekdays],
        "centroid_days": [int(n) for n in model.centroid_n],
        "centroids": [[float(x) for x in row] for row in model.centroids],
        "class_counts": [[float(x) for x in row] for row in model.class_counts],
        "silhouettes": {str(k): float(v) for k, v in model.silhouettes.items()},
        "per_min": [float(x) for x in model.series],
    }
    body = tomli_w.dumps(doc, multiline_strings=False)
    head = ("# storqos day model: learned by `storqos warm --save`, read by `storqos warm --model`\n"
            "# and by a gateway's [background] job (docs/gateway-seeds.md).\n")
    tomllib.loads(body)  # what we write must read back
    return head + body


def save_model(model: DayModel, path: Path) -> None:
    """Write ``model`` to ``path`` (whole, or not at all)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(dump_model(model))
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write the model: {e.strerror or e}", str(path)) from None


def load_model(path: Path, where: str = "--model") -> DayModel:
    """Read and check a day-model file: one error line naming the file for anything wrong."""
    _, raw = read_toml(path)
    if raw.get("format") != MODEL_FORMAT:
        raise InputError(f"{path}: not a storqos day model (no format = \"{MODEL_FORMAT}\"); make one with "
                         "`storqos warm TRACE --save model.toml`", where)
    if raw.get("version") != MODEL_VERSION:
        raise InputError(f"{path}: a day model of version {raw.get('version')!r} (made by storqos "
                         f"{raw.get('storqos_version', '?')}); this storqos reads version {MODEL_VERSION}", where)

    def bad(what: str) -> InputError:
        return InputError(f"{path}: {what}", where)

    try:
        thr = float(raw["threshold_per_min"])
        labels = [int(c) for c in raw["labels"]]
        weekdays = [int(w) for w in raw["weekdays"]]
        centroids = np.asarray(raw["centroids"], dtype=float)
        sizes = [int(n) for n in raw["centroid_days"]]
        counts = np.asarray(raw["class_counts"], dtype=float)
        series = np.asarray(raw["per_min"], dtype=float)
        silhouettes = {int(k): float(v) for k, v in dict(raw.get("silhouettes", {})).items()}
        smooth, min_run, first = int(raw["smooth_min"]), int(raw["min_run_min"]), int(raw["first_day"])
    except KeyError as e:
        raise bad(f"missing {e.args[0]}") from None
    except (TypeError, ValueError) as e:
        raise bad(f"a value of the wrong kind ({e})") from None
    k = len(centroids)
    if not (np.isfinite(thr) and thr > 0):
        raise bad(f"threshold_per_min must be > 0, got {thr:g}")
    if k < 1 or centroids.ndim != 2 or centroids.shape[1] != 24:
        raise bad("centroids: one row of 24 hourly features per day class")
    if counts.shape != (k, k) or len(sizes) != k:
        raise bad(f"class_counts ({k} x {k}) and centroid_days ({k}) must match the {k} classes")
    if not labels or any(not 0 <= c < k for c in labels) or len(weekdays) != len(labels):
        raise bad(f"labels: one class (0-{k - 1}) per training day, and one weekday each")
    if series.size != len(labels) * DAY_MIN or not np.isfinite(series).all() or (series < 0).any():
        raise bad(f"per_min: {len(labels)} days of {DAY_MIN} counts >= 0, got {series.size} values")
    m = DayModel(threshold=thr, labels=labels, centroids=centroids, silhouettes=silhouettes,
                 class_counts=counts, state_counts=np.zeros((2 * k, 2 * k)), centroid_n=sizes, weekdays=weekdays,
                 smooth_min=smooth, min_run_min=min_run, series=series, first_day=first)
    m._add_periods(series, first, labels)
    return m


__all__ = ["MODEL_FORMAT", "MODEL_VERSION", "dump_model", "load_model", "save_model"]
