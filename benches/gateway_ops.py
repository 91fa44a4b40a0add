"""Benchmark: what running the gateway as an operator would cost, against its targets.

Three measurements, each side by side in one run, with fio's nbd engine (libnbd) as the
client and a file of random data (a sparse file would let qemu-nbd answer reads as holes
without sending data, which measures something else):

1. **Metrics and limits**: 4 KiB random reads at queue depth 32 against `storqos serve`
   with Prometheus metrics scraped every second, an idle timeout, a per-export
   connection limit and an allow list, against the same build without them, and against
   qemu-nbd. Reported: IOPS (median of REPEATS, servers interleaved) and the ratios.
2. **Per-I/O server CPU with 100 tenants**: 100 exports (one tenant each) read by 100
   fio jobs at queue depth 1 (4 KiB random reads), against one job at queue depth 32;
   the server's CPU time (user + system, from /proc/PID/stat) over the run divided by
   the I/Os done. qemu-nbd serves the same 100 connections to one export for reference.
3. **TLS**: 64 KiB sequential reads at queue depth 8 over `nbds://` against the same
   gateway over plain `nbd://` (`--tls on` serves both).

    .venv/bin/python benches/gateway_ops.py [--seconds 5] [--repeats 3]

The gateway is started as `python -m storqos.cli serve` with this interpreter, so
`PYTHONPATH=other/tree/python` benchmarks that tree's build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

from gateway import free_port, wait_listening  # benches/gateway.py: the same helpers

REPEATS = 3
IMAGE_BYTES = 256 << 20
TENANTS = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fio(jobs: str, tmp: Path) -> dict[str, float]:
    """Run a fio job file; IOPS and bandwidth (bytes/s) summed over its jobs."""
    path = tmp / "job.fio"
    path.write_text(jobs)
    r = subprocess.run(["fio", "--output-format=json", str(path)], capture_output=True, text=True, cwd=tmp,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"fio failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout[r.stdout.index("{"):])
    ios = sum(j["read"]["total_ios"] for j in out["jobs"])
    return {"iops": sum(j["read"]["iops"] for j in out["jobs"]), "bw": sum(j["read"]["bw_bytes"] for j in out["jobs"]),
            "ios": float(ios)}


def storqos(args: list[str]) -> subprocess.Popen[bytes]:
    """`storqos serve ARGS`."""
    return subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def qemu_nbd(image: Path, port: int, connections: int = 1, options: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """qemu-nbd serving `image` as export `d` on 127.0.0.1:`port` (with `options`)."""
    return subprocess.Popen(["qemu-nbd", "-f", "raw", *options, "-x", "d", "-b", "127.0.0.1", "-p", str(port), "-t",
                             "-e", str(connections + 1), str(image)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def scrape(url: str, stop: threading.Event) -> None:
    """What Prometheus would do: fetch the metrics every second."""
    while not stop.wait(1.0):
        try:
            urllib.request.urlopen(url, timeout=5).read()
        except OSError:
            pass


def randread_qd32(port: int, seconds: int, tmp: Path) -> float:
    return fio(f"""
[r]
ioengine=nbd
uri=nbd://127.0.0.1:{port}/d
rw=randread
bs=4k
iodepth=32
time_based=1
runtime={seconds}
""", tmp)["iops"]


def metrics_and_limits(image: Path, tmp: Path, seconds: int, repeats: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {"off": [], "on": [], "qemu-nbd": []}
    for _ in range(repeats):
        for kind in runs:
            port = free_port()
            stop = threading.Event()
            if kind == "qemu-nbd":
                p = qemu_nbd(image, port)
            elif kind == "off":
                p = storqos(["--export", f"d={image}", "--listen", f"127.0.0.1:{port}", "--depth", "32"])
            else:
                mport = free_port()
                cfg = tmp / "on.toml"
                cfg.write_text(f"""
listen = "127.0.0.1:{port}"
metrics = "127.0.0.1:{mport}"
depth = 32
[[export]]
name = "d"
path = "{image}"
allow = ["127.0.0.1"]
[limits]
max_connections = 256
max_connections_per_export = 64
idle_timeout = "60s"
max_inflight = "128MiB"
""")
                p = storqos(["--config", str(cfg)])
                threading.Thread(target=scrape, args=(f"http://127.0.0.1:{mport}/metrics", stop), daemon=True).start()
            try:
                wait_listening(port, p)
                runs[kind].append(randread_qd32(port, seconds, tmp))
            finally:
                stop.set()
                p.terminate()
                p.wait(timeout=30)
    return {k: statistics.median(v) for k, v in runs.items()}


def cpu_per_io(image: Path, tmp: Path, seconds: int) -> dict[str, float]:
    """Server CPU µs per I/O: 100 tenants at QD 1, one connection at QD 32, qemu-nbd at 100 × QD 1."""
    out: dict[str, float] = {}
    exports = "".join(f'[[export]]\nname = "t{i}"\npath = "{image}"\ntenant = {i}\n' for i in range(TENANTS))
    for kind in ("storqos 100 x QD1", "storqos 1 x QD32", "qemu-nbd 100 x QD1"):
        port = free_port()
        if kind.startswith("qemu"):
            p = qemu_nbd(image, port, TENANTS)
            uris = ["d"] * TENANTS
        else:
            cfg = tmp / "many.toml"
            cfg.write_text(f'listen = "127.0.0.1:{port}"\ndepth = 32\n[policy]\nkind = "wf2q"\n{exports}')
            p = storqos(["--config", str(cfg)])
            uris = [f"t{i}" for i in range(TENANTS)] if "100" in kind else ["t0"]
        try:
            wait_listening(port, p)
            depth = 1 if "100" in kind else 32
            jobs = "".join(f"[j{i}]\nuri=nbd://127.0.0.1:{port}/{u}\n" for i, u in enumerate(uris))
            pid = p.pid
            before = cpu_s(pid)
            r = fio(f"[global]\nioengine=nbd\nrw=randread\nbs=4k\niodepth={depth}\ntime_based=1\nruntime={seconds}\n"
                    f"thread=1\n{jobs}", tmp)
            used = cpu_s(pid) - before
            out[kind] = used / r["ios"] * 1e6
            out[kind + " IOPS"] = r["iops"]
        finally:
            p.terminate()
            p.wait(timeout=30)
    return out


def make_certs(d: Path) -> None:
    def ssl(*a: str) -> None:
        subprocess.run(["openssl", *a], check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
        "-subj", "/CN=bench CA", "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca-cert.pem"))
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost",
        "-keyout", str(d / "server-key.pem"), "-out", str(d / "server.csr"))
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca-cert.pem"), "-CAkey", str(d / "ca-key.pem"),
        "-CAcreateserial", "-days", "1", "-extfile", str(d / "ext"), "-out", str(d / "server-cert.pem"))


def tls_vs_plain(image: Path, tmp: Path, seconds: int, repeats: int) -> dict[str, float]:
    """64 KiB sequential reads over plain NBD and over TLS, from storqos (`--tls on`
    serves both) and from qemu-nbd (one server each way): bandwidth (bytes/s) and the
    server's CPU seconds per GiB moved."""
    make_certs(tmp)
    ports = {k: free_port() for k in ("storqos", "qemu-nbd", "qemu-nbd-tls")}
    servers = {
        "storqos": storqos(["--export", f"d={image}", "--listen", f"127.0.0.1:{ports['storqos']}", "--tls", "on",
                            "--tls-cert", str(tmp / "server-cert.pem"), "--tls-key", str(tmp / "server-key.pem")]),
        "qemu-nbd": qemu_nbd(image, ports["qemu-nbd"]),
        "qemu-nbd-tls": subprocess.Popen(
            ["qemu-nbd", "--object", f"tls-creds-x509,id=tls0,endpoint=server,dir={tmp},verify-peer=off",
             "--tls-creds", "tls0", "-f", "raw", "-x", "d", "-b", "127.0.0.1", "-p", str(ports["qemu-nbd-tls"]), "-t",
             str(image)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    # fio's engine may not read local files (tls-certificates=): the certificate is not
    # checked, the traffic is encrypted all the same.
    cases = {
        "storqos plain": ("storqos", f"nbd://127.0.0.1:{ports['storqos']}/d"),
        "storqos TLS": ("storqos", f"nbds://127.0.0.1:{ports['storqos']}/d?tls-verify-peer=false"),
        "qemu-nbd plain": ("qemu-nbd", f"nbd://127.0.0.1:{ports['qemu-nbd']}/d"),
        "qemu-nbd TLS": ("qemu-nbd-tls", f"nbds://127.0.0.1:{ports['qemu-nbd-tls']}/d?tls-verify-peer=false"),
    }
    runs: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    try:
        for k, p in servers.items():
            wait_listening(ports[k], p)
        for _ in range(repeats):
            for case, (server, uri) in cases.items():
                pid = servers[server].pid
                before = cpu_s(pid)
                r = fio(f"[s]\nioengine=nbd\nuri={uri}\nrw=read\nbs=64k\niodepth=8\ntime_based=1\n"
                        f"runtime={seconds}\n", tmp)
                runs[case].append(r["bw"])
                cpu[case].append((cpu_s(pid) - before) / (r["ios"] * 65536 / 2**30))
    finally:
        for p in servers.values():
            p.terminate()
            p.wait(timeout=30)
    out = {k: statistics.median(v) for k, v in runs.items()}
    out.update({k + " cpu": statistics.median(v) for k, v in cpu.items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="length of each fio run")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args()
    for tool in ("fio", "qemu-nbd", "openssl"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is required (`make test` installs it)")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        image = tmp / "data.img"
        with open(image, "wb") as f:
            for _ in range(IMAGE_BYTES >> 20):
                f.write(os.urandom(1 << 20))
        print(f"{os.cpu_count()} CPUs; fio nbd engine; {args.seconds} s runs; median of {args.repeats}")
        m = metrics_and_limits(image, tmp, args.seconds, args.repeats)
        print("\n4 KiB random reads, queue depth 32 (IOPS)")
        print(f"  storqos, metrics + limits off  {m['off']:>10,.0f}")
        print(f"  storqos, metrics + limits on   {m['on']:>10,.0f}   on ÷ off {m['on'] / m['off']:.2f}")
        print(f"  qemu-nbd                       {m['qemu-nbd']:>10,.0f}   storqos on ÷ qemu-nbd "
              f"{m['on'] / m['qemu-nbd']:.2f}")
        c = cpu_per_io(image, tmp, args.seconds)
        print("\nserver CPU per I/O, 4 KiB random reads")
        for k in ("storqos 100 x QD1", "storqos 1 x QD32", "qemu-nbd 100 x QD1"):
            print(f"  {k:<22} {c[k]:>6.1f} µs   ({c[k + ' IOPS']:,.0f} IOPS)")
        t2 = tls_vs_plain(image, tmp, args.seconds, args.repeats)
        print("\n64 KiB sequential reads, queue depth 8: MiB/s (the server's CPU s per GiB)")
        for server in ("storqos", "qemu-nbd"):
            plain, tls = t2[f"{server} plain"], t2[f"{server} TLS"]
            print(f"  {server:<9} plain {plain / 2**20:>6,.0f} ({t2[f'{server} plain cpu']:.2f})   "
                  f"TLS {tls / 2**20:>6,.0f} ({t2[f'{server} TLS cpu']:.2f})   TLS ÷ plain {tls / plain:.2f}")


if __name__ == "__main__":
    main()
