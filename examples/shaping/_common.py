"""Shared helpers of the seed 000 (workload shaping) examples: trace loading with the
bundled fallback, markdown tables, plots, and the section files + index in docs/results.

Every example script writes ``docs/results/shaping_<name>.md`` (and its PNGs) and then
rewrites the index ``docs/results/shaping.md`` from the section files that exist, so any
one script, or ``scripts/reproduce.sh`` running all of them, leaves a consistent index.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import storqos
from storqos.base.shared import shared_dir

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "results"
SHARED = (shared_dir() or Path("../shared")) / "traces"  # storqos.base.shared: $STORQOS_SHARED, else ../shared
BUNDLED = REPO / "python" / "storqos" / "data" / "websearch-excerpt.mqsim"

#: The four excerpts of ../shared/traces used by the thesis-style results.
TRACE_FILES: dict[str, str] = {
    "WebSearch": "umass-websearch-excerpt/wsrch-small.trace",
    "FIU mail": "fiu-mail-excerpt/smalltrace.csv",
    "MSR hm_0": "msr-cambridge/hm_0_excerpt.csv",
    "TPC-C": "tpcc-excerpt/tpcc-small.trace",
}
#: Colours per trace and per recombiner, the same in every plot.
TRACE_COLORS = {
    "WebSearch": "tab:blue",
    "FIU mail": "tab:orange",
    "MSR hm_0": "tab:green",
    "TPC-C": "tab:red",
}
POLICY_STYLE = {
    "fcfs": ("FCFS", "black", "-"),
    "split": ("Split", "tab:orange", "--"),
    "fq": ("Fair Queuing", "tab:blue", "-."),
    "miser": ("Miser", "tab:red", "-"),
}

#: Index order of the section files: (name, title, the script that writes it).
SECTIONS: list[tuple[str, str]] = [
    ("capacity_tables", "Capacity tables (Table 4.1)"),
    ("fcfs_compliance", "FCFS at Cmin(90 %) (Figs. 4.2–4.3)"),
    ("recombiners", "FCFS, Split, Fair Queuing and Miser (Fig. 4.4)"),
    ("consolidation", "Consolidation (Figs. 4.5–4.6)"),
    ("power", "Power (Fig. 4.1, Table 4.2)"),
    ("rtd", "Response-time distribution (RTD, §3.2.2)"),
]


# --- command line and traces -----------------------------------------------------------


def cli(doc: str | None) -> argparse.Namespace:
    """``--shared DIR`` (default: the traces of storqos.base.shared's folder) and ``--docs DIR``
    (default: docs/results)."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument(
        "--shared",
        type=Path,
        default=SHARED,
        help="folder of the shared trace excerpts",
    )
    ap.add_argument(
        "--docs", type=Path, default=DOCS, help="where the section markdown and PNGs go"
    )
    return ap.parse_args()


@dataclass
class Traces:
    """The loaded excerpts (name → trace) and a sentence saying where they came from."""

    data: dict[str, pl.DataFrame]
    note: str
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.data[name]

    def names(self, *wanted: str) -> list[str]:
        """The wanted names (all by default) that are loaded, in TRACE_FILES order."""
        return [
            n for n in TRACE_FILES if n in self.data and (not wanted or n in wanted)
        ]


def _rel(p: Path) -> str:
    """``p`` relative to the repository (``../shared/...`` for its siblings)."""
    r = p.resolve()
    if r.is_relative_to(REPO.resolve()):
        return r.relative_to(REPO.resolve()).as_posix()
    if r.is_relative_to(REPO.parent.resolve()):
        return "../" + r.relative_to(REPO.parent.resolve()).as_posix()
    return str(p)


def load_traces(shared: Path) -> Traces:
    """The four excerpts from ``shared``; when a file is missing, WebSearch falls back to
    the bundled (shorter) excerpt and the other traces are left out. Prints the note."""
    data: dict[str, pl.DataFrame] = {}
    sources: dict[str, str] = {}
    missing: list[str] = []
    for name, rel in TRACE_FILES.items():
        p = shared / rel
        if p.is_file():
            data[name] = storqos.read_trace(p)
            sources[name] = _rel(p)
        elif name == "WebSearch" and BUNDLED.is_file():
            data[name] = storqos.read_trace(BUNDLED)
            sources[name] = _rel(BUNDLED)
            missing.append(name)
        else:
            missing.append(name)
    if not missing:
        note = f"Traces: the excerpts in `{_rel(shared)}` ({', '.join(f'`{rel}`' for rel in TRACE_FILES.values())})."
    else:
        web = data.get("WebSearch")
        fallback = (
            f"WebSearch is the bundled, shorter excerpt `{sources['WebSearch']}` ({web.height:,} requests)"
            if web is not None and "WebSearch" in missing
            else "WebSearch is from the shared excerpt"
        )
        others = [n for n in missing if n != "WebSearch"]
        note = (
            f"**`{_rel(shared)}` is missing or incomplete ({', '.join(missing)} not found there)**: {fallback}; "
            f"{', '.join(others) if others else 'no other trace is'} left out. "
            "The numbers below are therefore not those of the full set of excerpts."
        )
    print(note.replace("**", "").replace("`", ""))
    if "WebSearch" not in data:
        sys.exit(
            "no WebSearch trace: neither ../shared/traces nor the bundled excerpt was found"
        )
    return Traces(data, note, sources)


def trace_stats(t: pl.DataFrame) -> dict[str, Any]:
    a = t["arrival_ns"].to_numpy()
    span = (int(a.max()) - int(a.min())) / 1e9
    return {
        "requests": t.height,
        "span_s": span,
        "mean_iops": t.height / span if span > 0 else float("nan"),
    }


# --- formatting --------------------------------------------------------------------------


def num(v: Any, sig: int = 4) -> str:
    """A number with ``sig`` significant digits, thousands separators and no exponent."""
    if v is None:
        return "–"
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    v = float(v)
    if math.isnan(v):
        return "–"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    digits = max(0, sig - 1 - mag)
    return f"{v:,.{digits}f}"


def pct(v: float, digits: int = 1) -> str:
    """0.9123 → '91.2 %'."""
    return f"{100 * v:.{digits}f} %"


def md(df: pl.DataFrame, fmt: dict[str, Any] | None = None, sig: int = 4) -> str:
    """A markdown table; ``fmt`` maps a column to a format spec or a callable."""
    fmt = fmt or {}

    def cell(c: str, v: Any) -> str:
        f = fmt.get(c)
        if v is None:
            return "–"
        if callable(f):
            return f(v)
        if isinstance(f, str):
            return format(v, f)
        return num(v, sig)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += [
        "| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row, strict=False)) + " |"
        for row in df.iter_rows()
    ]
    return "\n".join(lines)


# --- plots -------------------------------------------------------------------------------


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "font.size": 9,
            "axes.titlesize": 10,
        }
    )
    return plt


def save(fig: Any, docs: Path, name: str) -> str:
    """Save ``fig`` as docs/results/<name>.png and return its markdown image link."""
    docs.mkdir(parents=True, exist_ok=True)
    p = docs / f"{name}.png"
    fig.savefig(p, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    print(f"plot: {p}")
    return f"![{name}]({p.name})"


def ms_axis(ax: Any, which: str = "x") -> None:
    """Log axis in milliseconds with plain tick labels (0.1, 1, 10, 100, 1000)."""
    from matplotlib.ticker import FuncFormatter

    f = FuncFormatter(lambda v, _: f"{v:g}")
    if which == "x":
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(f)
    else:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(f)


# --- section files and the index ----------------------------------------------------------


def write_section(
    docs: Path, name: str, summary: list[str], body: list[str], traces: Traces
) -> Path:
    """Write docs/results/shaping_<name>.md: title, summary (a blockquote the index
    copies), how it was made, the traces' origin, then ``body``; then rewrite the index."""
    title = dict(SECTIONS)[name]
    script = f"examples/shaping/{name}.py"
    lines = [f"# Workload shaping (seed 000): {title}", ""]
    lines += ["> " + s for s in summary] + [""]
    lines += [
        (
            f"Generated by `.venv/bin/python {script}` (also run by `scripts/reproduce.sh`); every number "
            "comes from that run. Capacities in IOPS, response times in ms. Index: [shaping.md](shaping.md)."
        ),
        "",
        traces.note,
        "",
        *body,
    ]
    docs.mkdir(parents=True, exist_ok=True)
    p = docs / f"shaping_{name}.md"
    p.write_text("\n".join(lines).rstrip() + "\n")
    print(f"written: {p}")
    write_index(docs)
    return p


_IMG = re.compile(r"!\[[^\]]*\]\((shaping_[^)]+\.png)\)")


def write_index(docs: Path) -> Path:
    """docs/results/shaping.md: one entry per existing section file, with its summary and
    its plots embedded."""
    lines = [
        "# Workload shaping (seed 000) on the trace excerpts",
        "",
        (
            "Lu, *Workload Shaping for QoS and Power Efficiency of Storage Systems*: RTT decomposition, "
            "the Miser recombiner, capacity planning (`storqos plan`, `python/storqos/planning/planner.py`). Each "
            "section below is written by one script in `examples/shaping/` (one command each, from the "
            "repository root, e.g. `.venv/bin/python examples/shaping/capacity_tables.py`); "
            "`scripts/reproduce.sh` runs them all. This index is rewritten by every one of them. "
            "The 10 M-request capacity-table benchmark is in [shaping_benchmark.md](shaping_benchmark.md)."
        ),
        "",
    ]
    notes = []
    for name, _ in SECTIONS:
        p = docs / f"shaping_{name}.md"
        if p.is_file():
            notes += [
                ln
                for ln in p.read_text().splitlines()
                if ln.startswith(("Traces: ", "**`"))
            ][:1]
    for n in dict.fromkeys(notes):
        lines += [n, ""]
    for name, title in SECTIONS:
        p = docs / f"shaping_{name}.md"
        lines += [f"## [{title}](shaping_{name}.md)", ""]
        if not p.is_file():
            lines += [
                f"Not generated yet: run `.venv/bin/python examples/shaping/{name}.py`.",
                "",
            ]
            continue
        text = p.read_text()
        quote = [ln for ln in text.splitlines() if ln.startswith("> ")]
        lines += quote + [""] if quote else []
        for img in dict.fromkeys(_IMG.findall(text)):
            lines += [f"![{img.removesuffix('.png')}]({img})", ""]
    p = docs / "shaping.md"
    p.write_text("\n".join(lines).rstrip() + "\n")
    print(f"written: {p}")
    return p
