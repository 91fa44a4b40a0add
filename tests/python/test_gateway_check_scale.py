"""`storqos serve --check` costs the same per export however many there are: 4,000
exports took 117 s (each export's line was looked up by reading the whole file again;
the gateway compared each export's name with every earlier one). The time of the
20,000-export check is in BENCHMARKS.md ("serve --check"); here, only its growth."""

from __future__ import annotations

import time
from pathlib import Path

from storqos.live.gateway import check
from storqos.live.gateway_config import load, merged


def _config(d: Path, n: int) -> Path:
    d.mkdir()
    with open(d / "a.img", "wb") as f:
        f.truncate(1 << 20)
    body = '[[tenant]]\nname = "t0"\n[[tenant]]\nname = "t1"\n' + "".join(
        f'[[export]]\nname = "e{i}"\npath = "a.img"\ntenant = "t{i % 2}"\n' for i in range(n))
    (d / "gw.toml").write_text('listen = "127.0.0.1:0"\n[policy]\nkind = "wf2q"\n' + body)
    return d / "gw.toml"


def _best_of_three(cfg: Path) -> float:
    """The fastest of three checks of ``cfg`` (the file read, the flags merged, the
    gateway's own check: what `serve --check` does), in seconds."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        info = check(merged(load(cfg)))
        times.append(time.perf_counter() - t0)
    assert info.exports[-1].tenant == 1
    return min(times)


def test_ten_times_the_exports_take_about_ten_times_as_long(tmp_path: Path) -> None:
    small, large = _config(tmp_path / "small", 1_000), _config(tmp_path / "large", 10_000)
    _best_of_three(small)  # imports and caches warmed
    t_small, t_large = _best_of_three(small), _best_of_three(large)
    ratio = t_large / t_small
    print(f"1,000 exports {t_small * 1e3:.0f} ms, 10,000 exports {t_large * 1e3:.0f} ms: x{ratio:.1f}")
    # Linear is x10; the quadratic parts made it x50 and more. A generous margin for
    # a busy machine.
    assert ratio < 25, (t_small, t_large)
