//! The registry's entries for the models of the QoS systems operators run
//! ([`crate::stacks`]): QEMU throttle groups, Linux blk-throttle and BFQ, nbdkit's rate
//! filter, SPDK's bdev QoS, Ceph's mClock profiles and librbd's QoS. Each takes its
//! system's own settings, under one vocabulary where the systems mean the same thing
//! (`iops`, `read_bps`, `iops_burst`, ...), so a trace is compared across them with the
//! same options. Each entry is built by the [`Form::Settings`] builder: every parameter
//! goes to the core under its key (durations in ns under `KEY_ns`), and the model's
//! spec refuses what its system would refuse.

use super::decl::{above, at, CliOption, Command, Form, Param, Policy, Value};

const SIMULATE: &[Command] = &[Command::Simulate];

const fn limit(key: &'static str, value: Value, help: &'static str) -> Param {
    Param::new(key, value, help).default("none").range(above(0.0), None)
}

const IOPS: Param = limit("iops", Value::Rates, "per-tenant limit on all I/O, IOPS (none = no limit)");
const READ_IOPS: Param = limit("read_iops", Value::Rates, "per-tenant limit on reads, IOPS");
const WRITE_IOPS: Param = limit("write_iops", Value::Rates, "per-tenant limit on writes, IOPS");
const BPS: Param = limit("bps", Value::ByteRates, "per-tenant limit on all I/O, bytes/s (none = no limit)");
const READ_BPS: Param = limit("read_bps", Value::ByteRates, "per-tenant limit on reads, bytes/s");
const WRITE_BPS: Param = limit("write_bps", Value::ByteRates, "per-tenant limit on writes, bytes/s");
const IOPS_BURST: Param = limit("iops_burst", Value::Rates, "per-tenant burst rate above iops, IOPS");
const READ_IOPS_BURST: Param = limit("read_iops_burst", Value::Rates, "per-tenant burst rate above read_iops, IOPS");
const WRITE_IOPS_BURST: Param = limit("write_iops_burst", Value::Rates, "per-tenant burst rate above write_iops, IOPS");
const BPS_BURST: Param = limit("bps_burst", Value::ByteRates, "per-tenant burst rate above bps, bytes/s");
const READ_BPS_BURST: Param =
    limit("read_bps_burst", Value::ByteRates, "per-tenant burst rate above read_bps, bytes/s");
const WRITE_BPS_BURST: Param =
    limit("write_bps_burst", Value::ByteRates, "per-tenant burst rate above write_bps, bytes/s");
const BURST_SECONDS: Param =
    Param::new("burst_seconds", Value::Counts, "per-tenant length of a burst at its burst rates, whole seconds")
        .default("1")
        .range(at(1.0), None);
const ROTATIONAL: Param =
    Param::new("rotational", Value::Bool, "the device is a spinning disk (the kernel's queue/rotational)")
        .default("false");

/// The models, in the order `--policy`'s help lists them (after the built-in policies).
pub const STACK_POLICIES: &[Policy] = &[
    Policy {
        name: "qemu-throttle",
        aliases: &["qemu", "throttle-group"],
        kind: "qemu_throttle",
        summary: "QEMU/libvirt I/O throttling and throttle groups: leaky buckets per limit, bursts (--iops, --bps, \
                  --iops-burst, --burst-seconds, --groups)",
        form: Some(Form::Settings),
        params: &[
            IOPS,
            READ_IOPS,
            WRITE_IOPS,
            BPS,
            READ_BPS,
            WRITE_BPS,
            IOPS_BURST,
            READ_IOPS_BURST,
            WRITE_IOPS_BURST,
            BPS_BURST,
            READ_BPS_BURST,
            WRITE_BPS_BURST,
            BURST_SECONDS,
            Param::new("iops_size", Value::Sizes, "per-tenant iops-size: a request of b bytes counts b / size I/Os")
                .default("none"),
            Param::new(
                "groups",
                Value::Counts,
                "per-tenant throttle group, numbered from 0 (the limits are then per group); default: each tenant \
                 its own",
            ),
        ],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["qemu", "libvirt"],
    },
    Policy {
        name: "blk-throttle",
        aliases: &["cgroup-throttle", "io.max"],
        kind: "blk_throttle",
        summary: "Linux blk-cgroup throttling (v1 blkio.throttle.*, v2 io.max): per-cgroup read/write IOPS and \
                  bytes/s (--read-iops, --write-iops, --read-bps, --write-bps)",
        form: Some(Form::Settings),
        params: &[READ_IOPS, WRITE_IOPS, READ_BPS, WRITE_BPS],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["cgroup"],
    },
    Policy {
        name: "bfq",
        aliases: &["bfq-weights", "io.bfq.weight"],
        kind: "bfq",
        summary: "Linux BFQ with cgroup weights: B-WF2Q+ over per-queue budgets, idling (--weights 1 to 1000, \
                  --slice-idle)",
        form: Some(Form::Settings),
        params: &[
            Param::new("weights", Value::Numbers, "per-tenant BFQ weights (blkio.bfq.weight, io.bfq.weight)")
                .default("100")
                .range(at(1.0), at(1000.0)),
            Param::new("slice_idle", Value::Duration, "how long BFQ waits for a queue's next request (0: never)")
                .default("8ms")
                .range(at(0.0), None),
            Param::new("low_latency", Value::Bool, "BFQ's low-latency heuristics (weight raising)").default("true"),
            ROTATIONAL,
        ],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["cgroup"],
    },
    Policy {
        name: "nbdkit-rate",
        aliases: &["nbdkit"],
        kind: "nbdkit_rate",
        summary: "nbdkit's rate filter, one export per tenant: a token bucket in bytes (--bps, --burstiness)",
        form: Some(Form::Settings),
        params: &[
            BPS,
            Param::new("burstiness", Value::Number, "how many seconds of the rate the bucket holds")
                .default("2")
                .range(above(0.0), None),
            Param::new("threads", Value::Count, "nbdkit's --threads: worker threads per connection")
                .default("16")
                .range(at(1.0), None),
        ],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["nbdkit"],
    },
    Policy {
        name: "spdk-qos",
        aliases: &["spdk"],
        kind: "spdk_qos",
        summary: "SPDK bdev QoS: per-bdev IOPS (multiples of 1,000) and MiB/s in 1 ms timeslices (--iops, --bps, \
                  --read-bps, --write-bps)",
        form: Some(Form::Settings),
        params: &[IOPS, BPS, READ_BPS, WRITE_BPS],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["spdk"],
    },
    Policy {
        name: "ceph-mclock",
        aliases: &["ceph", "osd-mclock"],
        kind: "ceph_mclock",
        summary: "Ceph OSD mClock profiles (high_client_ops, balanced, high_recovery_ops, custom): client, recovery \
                  and best-effort classes over mClock (--mclock-profile, --classes, --capacity)",
        form: Some(Form::Settings),
        params: &[
            Param::new("mclock_profile", Value::Choice, "the OSD's osd_mclock_profile").default("balanced").choices(&[
                "high_client_ops",
                "balanced",
                "high_recovery_ops",
                "custom",
            ]),
            Param::new("classes", Value::Choices, "per-tenant class: a client, recovery or best-effort work")
                .default("client")
                .choices(&["client", "recovery", "best_effort"]),
            Param::new("total_capacity", Value::Rate, "the OSD's osd_mclock_max_capacity_iops (simulate: --capacity)")
                .range(above(0.0), None)
                .required(),
            Param::new("client_res", Value::Fraction, "custom: a client's reservation, of the capacity"),
            Param::new("client_wgt", Value::Count, "custom: a client's weight").range(at(1.0), None),
            Param::new("client_lim", Value::Fraction, "custom: a client's limit, of the capacity"),
            Param::new("recovery_res", Value::Fraction, "custom: recovery's reservation, of the capacity"),
            Param::new("recovery_wgt", Value::Count, "custom: recovery's weight").range(at(1.0), None),
            Param::new("recovery_lim", Value::Fraction, "custom: recovery's limit, of the capacity"),
            Param::new("best_effort_res", Value::Fraction, "custom: best effort's reservation, of the capacity"),
            Param::new("best_effort_wgt", Value::Count, "custom: best effort's weight").range(at(1.0), None),
            Param::new("best_effort_lim", Value::Fraction, "custom: best effort's limit, of the capacity"),
        ],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["ceph"],
    },
    Policy {
        name: "rbd-qos",
        aliases: &["librbd", "rbd"],
        kind: "rbd_qos",
        summary: "librbd image QoS: token buckets per limit with bursts (--iops, --bps, --iops-burst, \
                  --burst-seconds)",
        form: Some(Form::Settings),
        params: &[
            IOPS,
            READ_IOPS,
            WRITE_IOPS,
            BPS,
            READ_BPS,
            WRITE_BPS,
            IOPS_BURST,
            READ_IOPS_BURST,
            WRITE_IOPS_BURST,
            BPS_BURST,
            READ_BPS_BURST,
            WRITE_BPS_BURST,
            BURST_SECONDS,
        ],
        serve_form: None,
        serve_params: &[],
        serve: false,
        back_end: None,
        from_tenants: &[],
        targets: &["rbd"],
    },
];

const fn option(key: &'static str, flag: &'static str, help: &'static str) -> CliOption {
    CliOption { key, flag, count: false, help, commands: SIMULATE }
}

/// The options of `storqos simulate` that give the models' settings.
pub const STACK_OPTIONS: &[CliOption] = &[
    option("iops", "--iops", "qemu-throttle, spdk-qos, rbd-qos: per-tenant limit on all I/O in IOPS, e.g. 200,none."),
    option("read_iops", "--read-iops", "Per-tenant limit on reads in IOPS (qemu-throttle, blk-throttle, rbd-qos)."),
    option("write_iops", "--write-iops", "Per-tenant limit on writes in IOPS (qemu-throttle, blk-throttle, rbd-qos)."),
    option(
        "bps",
        "--bps",
        "Per-tenant limit on all I/O in bytes/s, e.g. 100MiB/s,none (qemu-throttle, nbdkit-rate, \
                            spdk-qos, rbd-qos).",
    ),
    option("read_bps", "--read-bps", "Per-tenant limit on reads in bytes/s."),
    option("write_bps", "--write-bps", "Per-tenant limit on writes in bytes/s."),
    option(
        "iops_burst",
        "--iops-burst",
        "qemu-throttle (iops-total-max), rbd-qos (rbd_qos_iops_burst): per-tenant \
                                          burst rate in IOPS.",
    ),
    option("read_iops_burst", "--read-iops-burst", "Per-tenant burst rate of reads in IOPS."),
    option("write_iops_burst", "--write-iops-burst", "Per-tenant burst rate of writes in IOPS."),
    option("bps_burst", "--bps-burst", "Per-tenant burst rate in bytes/s."),
    option("read_bps_burst", "--read-bps-burst", "Per-tenant burst rate of reads in bytes/s."),
    option("write_bps_burst", "--write-bps-burst", "Per-tenant burst rate of writes in bytes/s."),
    option(
        "burst_seconds",
        "--burst-seconds",
        "Per-tenant length of a burst at the burst rates, whole seconds \
                                                (default 1).",
    ),
    option(
        "iops_size",
        "--iops-size",
        "qemu-throttle: per-tenant iops-size, e.g. 64KiB (a request of b bytes counts \
                                        b / size I/Os).",
    ),
    option("groups", "--groups", "qemu-throttle: per-tenant throttle group, e.g. 0,0,1 (limits are then per group)."),
    option("rotational", "--rotational", "bfq: the device is a spinning disk (true or false)."),
    option("slice_idle", "--slice-idle", "bfq: how long to wait for a queue's next request (default 8ms; 0: never)."),
    option("low_latency", "--low-latency", "bfq: the low-latency heuristics (true, the default, or false)."),
    option("burstiness", "--burstiness", "nbdkit-rate: seconds of the rate the bucket holds (default 2)."),
    option(
        "threads",
        "--threads",
        "nbdkit-rate: nbdkit's worker threads per connection (default 16; with 1, a \
                                    tenant's requests pass in arrival order).",
    ),
    option(
        "mclock_profile",
        "--mclock-profile",
        "ceph-mclock: osd_mclock_profile: balanced (default), high_client_ops, \
                                    high_recovery_ops or custom.",
    ),
    option("classes", "--classes", "ceph-mclock: per-tenant class: client (default), recovery or best_effort."),
];
