"""The settings of the real systems in their own syntax: QEMU's throttle-group objects,
QMP's block_set_io_throttle and libvirt's <iotune>, and nbdkit's rate filter, from the
specs of their models. The expected strings are the systems' documented names
(qemu-storage-daemon(1), QMP's BlockIOThrottle, libvirt's domain format, nbdkit-rate-filter(1))."""

from __future__ import annotations

import pytest
from storqos.base.errors import InputError
from storqos.planning.targets import nbdkit, qemu


def test_qemu_daemon_args_put_each_tenant_in_its_group_with_its_limits() -> None:
    spec = {"kind": "qemu_throttle", "iops": [200, None], "write_bps": [None, 1048576], "iops_burst": [400, None],
            "burst_seconds": [5, None]}
    args = qemu.daemon_args(spec, [["driver=null-co"], ["driver=file", "filename=/tmp/b.img"]], ["web", "batch"],
                            socket="/tmp/s.sock")
    assert args[:4] == ["--object", "throttle-group,id=tg0,limits.iops-total=200,limits.iops-total-max=400,"
                                    "limits.iops-total-max-length=5",
                        "--object", "throttle-group,id=tg1,limits.bps-write=1048576"]
    assert "driver=throttle,node-name=thr1,throttle-group=tg1,file=data1" in args
    assert "driver=file,filename=/tmp/b.img,node-name=data1" in args
    assert args[-4:] == ["--export", "type=nbd,id=export0,node-name=thr0,name=web,writable=on",
                         "--export", "type=nbd,id=export1,node-name=thr1,name=batch,writable=on"]
    assert ["--nbd-server", "addr.type=unix,addr.path=/tmp/s.sock"] == args[-6:-4]


def test_qemu_groups_share_one_throttle_group() -> None:
    spec = {"kind": "qemu_throttle", "iops": [100], "groups": [0, 0]}
    args = qemu.daemon_args(spec, [["driver=null-co"]] * 2, ["a", "b"], address=("127.0.0.1", 10809))
    assert args.count("--object") == 1
    assert "driver=throttle,node-name=thr0,throttle-group=tg0,file=data0" in args
    assert "driver=throttle,node-name=thr1,throttle-group=tg0,file=data1" in args


def test_qmp_sets_every_base_limit_and_the_bursts() -> None:
    spec = {"kind": "qemu_throttle", "read_iops": [300], "read_iops_burst": [600], "burst_seconds": [2],
            "iops_size": [65536]}
    (cmd,) = qemu.qmp_commands(spec, ["virtio-disk0"])
    assert cmd["execute"] == "block_set_io_throttle"
    a = cmd["arguments"]
    assert (a["id"], a["iops"], a["iops_rd"], a["iops_wr"], a["bps"], a["bps_rd"], a["bps_wr"]) == \
        ("virtio-disk0", 0, 300, 0, 0, 0, 0)
    assert (a["iops_rd_max"], a["iops_rd_max_length"], a["iops_size"]) == (600, 2, 65536)
    assert "group" not in a


def test_libvirt_iotune_uses_libvirts_element_names() -> None:
    spec = {"kind": "qemu_throttle", "iops": [500], "iops_burst": [1000], "burst_seconds": [10], "bps": [None]}
    (xml,) = qemu.libvirt_iotune(spec, 1)
    assert xml.splitlines() == ["<iotune>", "  <total_iops_sec>500</total_iops_sec>",
                                "  <total_iops_sec_max>1000</total_iops_sec_max>",
                                "  <total_iops_sec_max_length>10</total_iops_sec_max_length>", "</iotune>"]


def test_qemu_refuses_a_fractional_limit() -> None:
    with pytest.raises(InputError, match="whole number"):
        qemu.limits({"iops": [100.5]}, 0)


def test_nbdkit_rate_is_in_bits_per_second() -> None:
    # 100 reads of 4 KiB a second: 409,600 bytes/s = 3,276,800 bits/s.
    assert nbdkit.rate_args({"bps": [409600.0], "burstiness": 0.5}, 0) == ["rate=3276800", "burstiness=0.5"]
    assert nbdkit.rate_args({"bps": [None]}, 0) == []
    argv = nbdkit.command_line({"bps": [1000.0]}, 0, ["null", "size=1G"], socket="/tmp/t.sock", filters=("delay",))
    assert argv == ["nbdkit", "--filter=rate", "--filter=delay", "--unix", "/tmp/t.sock", "null", "size=1G",
                    "rate=8000"]
