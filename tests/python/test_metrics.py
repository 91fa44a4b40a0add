"""`storqos serve --metrics`: a real Prometheus (Debian's
`prometheus`, installed by `make test`) scrapes the gateway every second during a short
fio run, and its query API returns the tenant's request rate as fio measured it."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import free_port
from test_serve import Server, _fio, _image, _tool


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_prometheus_scrapes_the_gateway_and_sees_the_request_rate(tmp_path: Path) -> None:
    prometheus = _tool("prometheus", "prometheus")
    a = _image(tmp_path / "a.img", 16 << 20)
    s = Server("-e", f"a={a}:0", "--policy", "fcfs", "--iops", "800", "--listen", "127.0.0.1:0",
               "--metrics", "127.0.0.1:0", "--for", "120s")
    prom = None
    try:
        line, port = s.ready()
        m = re.search(r"metrics at http://(127\.0\.0\.1:\d+)/metrics", line)
        assert m, line
        text = _get(f"http://{m.group(1)}/metrics")
        assert 'storqos_requests_total{tenant="0",op="read"} 0' in text and text.rstrip().endswith("# EOF"), text
        web = free_port()
        (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: storqos
    static_configs:
      - targets: ["{m.group(1)}"]
""")
        prom = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
        api = f"http://127.0.0.1:{web}/api/v1"
        deadline = time.monotonic() + 30
        while True:  # until Prometheus answers and has scraped the gateway once
            try:
                targets = json.loads(_get(f"{api}/targets"))["data"]["activeTargets"]
                if targets and targets[0]["health"] == "up":
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and prom.poll() is None, "Prometheus did not come up"
            time.sleep(0.2)
        jobs = _fio(tmp_path, f"""
[a]
ioengine=nbd
uri=nbd://127.0.0.1:{port}/a
rw=randread
bs=4k
iodepth=4
time_based=1
runtime=6
""")
        end = time.time()
        fio_iops = float(jobs["a"]["read"]["iops"])  # type: ignore[index]
        time.sleep(1.5)  # the last scrape of the run
        query = urllib.parse.quote('rate(storqos_requests_total{tenant="0",op="read"}[4s])')
        result = json.loads(_get(f"{api}/query?query={query}&time={end - 1:.3f}"))["data"]["result"]
        assert result, "Prometheus has no storqos_requests_total series"
        rate = float(result[0]["value"][1])
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=20)
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)
    # The emulated device serves 800 IOPS; fio saw about that, and so does Prometheus.
    assert 600 <= fio_iops <= 850, fio_iops
    assert abs(rate - fio_iops) <= 0.15 * fio_iops, (rate, fio_iops)
    print(f"fio {fio_iops:.0f} IOPS, Prometheus rate() {rate:.0f} /s")


def test_slow_clients_never_keep_the_scrapes_out(tmp_path: Path) -> None:
    """Four times as many slow clients as the endpoint answers at once, each sending its
    request one byte at a time (a slowloris): each used to keep its place for 10 s, and
    a scrape waited behind them. curl's scrapes beside them are answered at once now."""
    import threading

    curl = _tool("curl", "curl")
    a = _image(tmp_path / "a.img")
    s = Server("-e", f"a={a}:0", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--for", "120s")
    stop = threading.Event()
    slow: list[socket.socket] = []
    try:
        line, _ = s.ready()
        m = re.search(r"metrics at http://(127\.0\.0\.1:\d+)/metrics", line)
        assert m, line
        host, port = m.group(1).split(":")
        for _ in range(64):  # the endpoint's 16 places, four times over
            c = socket.create_connection((host, int(port)), timeout=5)
            c.sendall(b"GET /met")
            slow.append(c)

        def trickle() -> None:  # one more byte on each, twice a second, for at most 10 s
            for _ in range(20):
                if stop.wait(0.5):
                    return
                for c in slow:
                    try:
                        c.send(b"r")
                    except OSError:
                        pass

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        took = []
        for _ in range(10):
            r = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--max-time", "10",
                                f"http://{m.group(1)}/metrics"], capture_output=True, text=True, timeout=30)
            code, seconds = r.stdout.split()
            assert code == "200", r.stdout + r.stderr
            took.append(float(seconds))
        stop.set()
        t.join(timeout=5)
    finally:
        stop.set()
        for c in slow:
            c.close()
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)
    print(f"10 scrapes beside 64 slow clients: {min(took) * 1e3:.1f}-{max(took) * 1e3:.1f} ms")
    assert max(took) < 2.0, took
