"""An experiment's results written to a folder: Parquet tables, a JSON summary and the
HTML report, each whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

from storqos.base.paths import make_folder, replacing
from storqos.experiments.experiment import ExperimentResult
from storqos.experiments.report import write_report


def write_outputs(result: ExperimentResult, out: Path, *, report: bool = True) -> dict[str, str]:
    """Write the Parquet tables, the JSON summary and the HTML report into ``out`` (made
if missing, its parent must exist: :func:`storqos.base.paths.make_folder`)."""
    make_folder(out, "--out")
    files = {
        "tenants": out / "tenants.parquet",
        "windows": out / "windows.parquet",
        "cdf": out / "cdf.parquet",
        "summary": out / "summary.json",
    }
    for key in ("tenants", "windows", "cdf"):
        with replacing(files[key]) as part:
            getattr(result, key).write_parquet(part)
    if report:
        files["report"] = out / "report.html"
        result.files = {k: str(v) for k, v in files.items()}
        write_report(result, files["report"])
    result.files = {k: str(v) for k, v in files.items()}
    with replacing(files["summary"]) as part:
        part.write_text(json.dumps(result.summary(), indent=2, default=float) + "\n")
    return result.files
