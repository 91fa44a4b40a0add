"""The SLO lines of the HTML reports (`storqos run`'s and `storqos advise`'s) sit at the
SLO in the units of the axis they cross: a 10 ms SLO at 10 ms on the log-scaled
response-time axis of a CDF, a 50 ms SLO at 50 ms on the log-scaled p99 axis of a
capacity curve.

Each page is rendered in headless Chromium; the test reads, from the SVG plotly drew,
each dashed line's pixel position and the axis's labelled ticks at powers of ten, and
places the SLO between the two ticks around it by its log10 (what a reader does with a
ruler). Nothing of the report's code or of plotly's own conversions is used to find where
the line should be.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_cli
from test_experiment import SMALL, headless

#: How far (px) a line may sit from where the ticks put its value: plotly rounds
#: positions to 1/100 px; a line at log10 of a 10 ms SLO sat some 100 px off.
TOLERANCE_PX = 1.0


@dataclass
class Plot:
    """What one rendered figure shows: per axis ("x", "x2", "y", …) its labelled ticks as
    (value, pixel, font size), and its dashed lines as (axis, pixel across it)."""

    ticks: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    lines: list[tuple[str, float]] = field(default_factory=list)


def _label(text: str) -> float | None:
    """A tick label as a number ("10", "0.1", "1k", "2M"), None for another text."""
    m = re.fullmatch(r"([0-9.]+)([kMG]?)", text.strip().replace(",", ""))
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]


class _Geometry(HTMLParser):
    """Collects, figure by figure (each ``class="storqos-figure"`` div), the ticks and
    the shapes of plotly's SVG in a DOM that Chromium dumped."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: list[Plot] = []
        self.stack: list[tuple[str, str]] = []  # (tag, class) of the open elements
        self.tick: tuple[str, float, float] | None = None  # axis, pixel and font size of the tick label being read
        self.shape_axis: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        cls = a.get("class", "")
        if tag == "div" and "storqos-figure" in cls.split():
            self.plots.append(Plot())
        self.stack.append((tag, cls))
        if tag == "g" and cls == "shape-group":
            # clip-path="url(#clip<id>x2)": the axis the line belongs to
            m = re.search(r"(x\d*|y\d*)\)$", a.get("clip-path", ""))
            self.shape_axis = m.group(1) if m else None
        parent = self.stack[-2] if len(self.stack) > 1 else ("", "")
        if tag == "text" and parent[0] == "g" and parent[1].endswith("tick"):
            axis = parent[1].removesuffix("tick")
            m = re.search(r"translate\(([-0-9.e]+),\s*([-0-9.e]+)\)", a.get("transform", ""))
            size = re.search(r"font-size:\s*([0-9.]+)px", a.get("style", ""))
            if m and size:
                self.tick = (axis, float(m.group(1) if axis.startswith("x") else m.group(2)), float(size.group(1)))
        if tag == "path" and self.shape_axis and "data-index" in a and "stroke-dasharray" in a.get("style", ""):
            m = re.fullmatch(r"M([-0-9.e]+),([-0-9.e]+)L([-0-9.e]+),([-0-9.e]+)", a.get("d", "").replace(" ", ""))
            assert m, f"an SLO line that is not a straight segment: {a.get('d')}"
            x0, y0, x1, y1 = map(float, m.groups())
            vertical = self.shape_axis.startswith("x")
            assert (x0 == x1) if vertical else (y0 == y1), f"a line not across its axis: {a.get('d')}"
            self.plots[-1].lines.append((self.shape_axis, x0 if vertical else y0))

    def handle_data(self, data: str) -> None:
        if self.tick is not None:
            v = _label(data)
            if v is not None:
                self.plots[-1].ticks.setdefault(self.tick[0], []).append((v, self.tick[1], self.tick[2]))
            self.tick = None

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            t, cls = self.stack.pop()
            if t == "g" and cls == "shape-group":
                self.shape_axis = None
            if t == tag:
                break
        self.tick = None


def plots(dom: str) -> list[Plot]:
    g = _Geometry()
    g.feed(dom)
    return g.plots


def tick_values(ticks: list[tuple[float, float, float]], vertical: bool) -> list[tuple[float, float]]:
    """A log axis's ticks as (value, pixel), read as a person reads them: plotly labels
    the powers of ten in full and the ticks between them, in a smaller font, by their
    first digit only ("2", "5" for 20 and 50 after the label 10). ``vertical``: a y
    axis, whose values grow upwards (pixels downwards)."""
    order = sorted(ticks, key=lambda t: -t[1] if vertical else t[1])
    full = max(size for _, _, size in order)
    if all(size == full for _, _, size in order):
        return [(v, px) for v, px, _ in order]
    first = next(v for v, _, size in order if size == full)
    decade = math.log10(first) - 1  # the small labels before the first full one
    out = []
    for v, px, size in order:
        if size == full:
            decade = math.log10(v)
            out.append((v, px))
        else:
            out.append((v * 10**decade, px))
    return out


def pixel_on_log_axis(ticks: list[tuple[float, float]], value: float) -> float:
    """Where ``value`` falls on a log axis with these (value, pixel) ticks: pixels go as
    log10 of the value, between the two ticks around it (or the two nearest it)."""
    marks = sorted((math.log10(v), px) for v, px in ticks if v > 0)
    assert len(marks) >= 2, f"fewer than two ticks labelled: {ticks}"
    e = math.log10(value)
    k = min(max(next((i for i, (le, _) in enumerate(marks) if le > e), len(marks)), 1), len(marks) - 1)
    (e0, p0), (e1, p1) = marks[k - 1], marks[k]
    return p0 + (e - e0) / (e1 - e0) * (p1 - p0)


def assert_lines_at(plot: Plot, expected: dict[str, float]) -> None:
    """Every dashed line of ``plot`` sits at ``expected[axis]`` (ms) on its axis."""
    assert sorted(a for a, _ in plot.lines) == sorted(expected), plot.lines
    for axis, px in plot.lines:
        want = pixel_on_log_axis(tick_values(plot.ticks[axis], axis.startswith("y")), expected[axis])
        assert abs(px - want) <= TOLERANCE_PX, (f"the {expected[axis]:g} ms line of axis {axis} is drawn at {px:.2f} px, "
                                                f"the axis puts {expected[axis]:g} ms at {want:.2f} px")


def test_the_geometry_reader_sees_a_line_off_its_value(tmp_path: Path) -> None:
    # The reader is not blind: a line placed at log10 of the value is found where it is.
    import plotly.graph_objects as go
    import plotly.offline

    fig = go.Figure(go.Scatter(x=[1, 1000], y=[0, 1]))
    fig.update_xaxes(type="log")
    fig.add_vline(x=math.log10(20), line_dash="dash")
    page = tmp_path / "probe.html"
    page.write_text(f"<html><head><script>{plotly.offline.get_plotlyjs()}</script></head><body>"
                    f"<div class='storqos-figure'>{fig.to_html(full_html=False, include_plotlyjs=False)}</div></body></html>")
    dom, console = headless(page)
    assert console == [], console
    (plot,) = plots(dom)
    with pytest.raises(AssertionError, match="the 20 ms line of axis x"):
        assert_lines_at(plot, {"x": 20})
    assert_lines_at(plot, {"x": math.log10(20)})


def test_run_report_draws_each_slo_at_its_latency(tmp_path: Path) -> None:
    # web: SLO 10 ms, batch: SLO 50 ms, backup: none (tenants in the panels' order).
    exp = tmp_path / "exp.toml"
    exp.write_text(SMALL)
    r = run_cli("run", str(exp), "--out", str(tmp_path / "out"), "--workers", "1")
    assert r.code == 0, r.err
    page = (tmp_path / "out" / "report.html").read_text()
    # The figures store each vertical line at the SLO in ms, as the axis' data are.
    assert {float(x) for x in re.findall(r'"x0":([0-9.e+-]+),"x1":\1\b', page)} == {10.0, 50.0}
    dom, console = headless(tmp_path / "out" / "report.html")
    assert console == [], console
    curves, cdf_800, series_800, cdf_1200, series_1200 = plots(dom)
    # Capacity curves: p99 (ms, log axis) against the capacity, a horizontal SLO line per panel.
    assert_lines_at(curves, {"y": 10, "y2": 50})
    for cdf in (cdf_800, cdf_1200):
        assert_lines_at(cdf, {"x": 10, "x2": 50})
    for series in (series_800, series_1200):
        assert series.lines == []


ADVISE = """
name = "small"
duration = "10s"
seed = 3
[device]
kind = "constant"
[[tenant]]
name = "steady"
generator = { kind = "poisson", rate = "300" }
slo = "p99<=20ms"
[[tenant]]
name = "bursty"
generator = { kind = "onoff", rate_on = "2k", rate_off = 0, mean_on = "100ms", mean_off = "900ms" }
slo = "p95<=200ms"
"""


def test_advise_report_draws_each_slo_at_its_latency(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(ADVISE)
    r = run_cli("advise", str(f), "--policy", "fcfs", "--workers", "1", "--out", str(tmp_path / "o"))
    assert r.code == 0, r.err
    page = tmp_path / "o" / "report.html"
    assert {float(x) for x in re.findall(r'"x0":([0-9.e+-]+),"x1":\1\b', page.read_text())} == {20.0, 200.0}
    dom, console = headless(page)
    assert console == [], console
    (cdf,) = plots(dom)
    assert_lines_at(cdf, {"x": 20, "x2": 200})
