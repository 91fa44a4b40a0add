//! The registry's entries for the built-in policies: the seeds' and the baselines'
//! (FCFS, EDF, WF2Q+, SFQ(D), mClock, YFQ, ...), and the options that give their
//! parameters.

use super::decl::{above, at, below, CliOption, Command, Form, Param, Policy, Value, BOTH};

const FLOW_KEYS: &[&str] = &["tenant", "class"];

const WEIGHTS: Param = Param::new("weights", Value::Numbers, "per-tenant weights; tenants beyond the list weigh 1")
    .range(above(0.0), None);
const BY: Param = Param::new("by", Value::Choice, "what the queue shares between").default("tenant").choices(FLOW_KEYS);
const COST: Param = Param::new(
    "cost",
    Value::Size,
    "what a request costs: iops (one operation) or a reference size (b bytes cost 1 + b / size)",
)
.default("iops");
const CMIN: Param =
    Param::new("cmin", Value::Rate, "the primary class's capacity Cmin, IOPS").range(above(0.0), None).required();
const DELTA: Param = Param::new("deadlines", Value::Durations, "the one deadline δ of the primary class (one value)")
    .range(above(0.0), None)
    .required();
const TOTAL_CAPACITY: Param = Param::new(
    "total_capacity",
    Value::Rate,
    "the device's capacity Cmin + ΔC, IOPS (simulate: --capacity; serve: --iops)",
)
.range(above(0.0), None)
.required();
const BATCH: Param = Param::new("batch", Value::Count, "YFQ's batch size").default("1").range(at(1.0), None);
const SLO: Param = Param::new(
    "slo",
    Value::Slos,
    "per-class SLOs R_i at D_i (experiment files and serve: from the tenants' reservation and slo)",
)
.required();
const PERCENTILE: Param =
    Param::new("percentile", Value::Percent, "the latency percentile the SLOs are judged at").default("95");
const SARC_PERIOD: Param =
    Param::new("period", Value::Duration, "SARC's credit period T_SARC").default("100ms").range(above(0.0), None);
const CONTROL_WINDOW: Param = Param::new("control_window", Value::Duration, "AVATAR's / Facade's control window")
    .default("1s")
    .range(above(0.0), None);
const P_RT: Param =
    Param::new("p_rt", Value::Number, "ADAPTIVE's response-time margin (adaptive+avatar)").default("0.2");
const P_INC: Param =
    Param::new("p_inc", Value::Number, "ADAPTIVE's credit increase (adaptive+avatar)").default("0.025");
const P_DEC: Param = Param::new("p_dec", Value::Number, "ADAPTIVE's credit decrease (adaptive+avatar)").default("0.05");
const FACADE_OVERLOAD: Param =
    Param::new("facade_overload", Value::Choice, "how Facade detects overload (sarc+facade)")
        .default("per_class")
        .choices(&["per_class", "total"]);
const TWO_LEVEL: &[Param] = &[SLO, PERCENTILE, SARC_PERIOD, CONTROL_WINDOW, P_RT, P_INC, P_DEC, FACADE_OVERLOAD];
const GAIN: Param = Param::new(
    "gain",
    Value::Gain,
    "the controller gain K, IOPS per ms of error, or online (the plant gain measured by the loop)",
);
const POLE: Param = Param::new("pole", Value::Number, "the closed-loop pole p placed instead of a gain: K = (1 − p)/G")
    .default("0.4")
    .range(above(-1.0), below(1.0));
const PLANT_GAIN: Param = Param::new("plant_gain", Value::Number, "the plant gain G, ms of p95 per IOPS")
    .default("0.3")
    .range(above(0.0), None);
const MODE: Param = Param::new(
    "mode",
    Value::Choice,
    "feedback (rates follow the error), fixed (rates stay at the demanded IOPS) or off (no buckets)",
)
.default("feedback")
.choices(&["feedback", "fixed", "off"]);

/// The fair queues' weights: the tenants' `weight`.
const WEIGHT: &[(&str, &[&str])] = &[("weights", &["weight"])];
/// The two-level schedulers' per-class SLOs: the tenants' `reservation` (R_i) at their `slo` (D_i).
const SLOS: &[(&str, &[&str])] = &[("slo", &["reservation", "slo"])];

/// Every built-in policy, in the order `--policy`'s help lists them.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: "fcfs",
        aliases: &["fifo"],
        kind: "fcfs",
        summary: "first-come first-served (no QoS)",
        form: Some(Form::Plain),
        params: &[],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: &[],
        targets: &[],
    },
    Policy {
        name: "edf",
        aliases: &[],
        kind: "edf",
        summary: "earliest deadline first, per-class relative deadlines (--deadline)",
        form: Some(Form::Deadlines),
        params: &[Param::new(
            "deadlines",
            Value::Durations,
            "per-tenant relative deadlines (a bare number is ms); tenants beyond the list get the last",
        )
        .range(above(0.0), None)
        .required()],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: &[],
        targets: &[],
    },
    Policy {
        name: "wf2q",
        aliases: &["wf2q+"],
        kind: "wf2q",
        summary: "WF2Q+ weighted fair queuing between tenants (--weights)",
        form: Some(Form::FairQueue),
        params: &[WEIGHTS, BY, COST],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: WEIGHT,
        targets: &[],
    },
    Policy {
        name: "sfq",
        aliases: &["sfq(d)"],
        kind: "sfq",
        summary: "SFQ(D) start-time fair queuing with dispatch depth D (--weights, --depth)",
        form: Some(Form::FairQueue),
        params: &[
            WEIGHTS,
            BY,
            COST,
            Param::new("depth", Value::Count, "the dispatch depth D (serve: --depth, the backend's depth)")
                .default("1")
                .range(at(1.0), at(u32::MAX as f64)),
        ],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: WEIGHT,
        targets: &[],
    },
    Policy {
        name: "miser",
        aliases: &["rtt+miser"],
        kind: "miser",
        summary: "RTT decomposition + Miser recombination at Cmin for deadline δ (--cmin, --deadline)",
        form: Some(Form::Decomposition),
        params: &[CMIN, DELTA],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: &[],
        targets: &[],
    },
    Policy {
        name: "rtt-fq",
        aliases: &["rtt+fq"],
        kind: "rtt",
        summary: "RTT decomposition + WF2Q+ between the classes, weights Cmin : ΔC (--cmin, --deadline, --capacity)",
        form: Some(Form::Decomposition),
        params: &[CMIN, DELTA, TOTAL_CAPACITY],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: Some("wf2q"),
        from_tenants: &[],
        targets: &[],
    },
    Policy {
        name: "mclock",
        aliases: &[],
        kind: "mclock",
        summary: "mClock (OSDI'10, Ceph's dmclock): per-tenant reservations, weights and limits in IOPS (reservations, weights, limits)",
        form: Some(Form::Tags),
        params: &[
            Param::new("reservations", Value::Rates, "per-tenant reservations, IOPS (0 = none)")
                .default("0")
                .range(at(0.0), None),
            WEIGHTS,
            Param::new("limits", Value::Rates, "per-tenant limits, IOPS (none = no limit)")
                .default("none")
                .range(above(0.0), None),
            COST,
            Param::new("limit_break", Value::Bool, "serve beyond the limits when the device would idle")
                .default("false"),
            Param::new("at_limit", Value::AtLimit, "what a request beyond its tenant's limit gets").default("wait"),
            BY,
        ],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: &[("weights", &["weight"]), ("reservations", &["reservation"]), ("limits", &["limit"])],
        targets: &[],
    },
    Policy {
        name: "yfq",
        aliases: &[],
        kind: "yfq",
        summary: "YFQ proportional share in batches, the leaky bucket's back end (weights, batch)",
        form: Some(Form::FairQueue),
        params: &[WEIGHTS, BATCH],
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: WEIGHT,
        targets: &[],
    },
    Policy {
        name: "fclb",
        aliases: &[],
        kind: "fclb",
        summary: "feedback-controlled leaky bucket over YFQ (workloads IOPS:RT[:bucket], weights, gain or pole)",
        form: Some(Form::LeakyBucket),
        params: &[
            Param::new("workloads", Value::Workloads, "per-tenant demanded IOPS and p95 response time").required(),
            Param::new("weights", Value::Numbers, "the YFQ back end's per-tenant weights").range(above(0.0), None),
            BATCH,
            GAIN,
            POLE,
            PLANT_GAIN,
            MODE,
        ],
        serve_form: Some(Form::TenantBuckets),
        serve_params: &[
            GAIN,
            POLE,
            Param::new(
                "plant_gain",
                Value::Number,
                "the plant gain G, ms of p95 per IOPS (default: at the knee of the emulated capacity)",
            )
            .range(above(0.0), None),
            Param::new("period", Value::Duration, "the control period").default("1s").range(above(0.0), None),
            MODE,
            Param::new("buckets", Value::Counts, "per-tenant token bucket sizes").range(at(1.0), None),
            Param::new("weights", Value::Numbers, "the YFQ back end's per-tenant weights (default: the reservations)")
                .range(above(0.0), None),
            Param::new("admission", Value::Bool, "admission control at connect time").default("true"),
            Param::new("admission_profile", Value::Duration, "the length of the admission's simulated profile")
                .range(above(0.0), None),
        ],
        serve: true,
        back_end: Some("yfq"),
        from_tenants: &[],
        targets: &[],
    },
    Policy {
        name: "sarc+avatar",
        aliases: &["sarc", "sarc_avatar"],
        kind: "sarc_avatar",
        summary: "SARC credits over AVATAR's EDF + queue-threshold controller (--slo)",
        form: Some(Form::TwoLevel),
        params: TWO_LEVEL,
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: SLOS,
        targets: &[],
    },
    Policy {
        name: "sarc+facade",
        aliases: &["sarc_facade"],
        kind: "sarc_facade",
        summary: "SARC over Facade's EDF + AIMD device depth, SARC+AVATAR's baseline (--slo)",
        form: Some(Form::TwoLevel),
        params: TWO_LEVEL,
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: SLOS,
        targets: &[],
    },
    Policy {
        name: "fixed+avatar",
        aliases: &["fixed", "fixed_avatar"],
        kind: "fixed_avatar",
        summary: "periodic credits only (FIXED) over AVATAR, a SARC baseline (--slo)",
        form: Some(Form::TwoLevel),
        params: TWO_LEVEL,
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: SLOS,
        targets: &[],
    },
    Policy {
        name: "adaptive+avatar",
        aliases: &["adaptive", "adaptive_avatar"],
        kind: "adaptive_avatar",
        summary: "ADAPTIVE credit amounts over AVATAR, a SARC baseline (--slo, p_rt, p_inc, p_dec)",
        form: Some(Form::TwoLevel),
        params: TWO_LEVEL,
        serve_form: None,
        serve_params: &[],
        serve: true,
        back_end: None,
        from_tenants: SLOS,
        targets: &[],
    },
    Policy {
        name: "baa",
        aliases: &[],
        kind: "baa",
        summary: "BAA (or DRF, FQ) weights over WF2Q+ in front of the tiers, from the hit ratios measured (config file)",
        form: None,
        params: &[],
        serve_form: Some(Form::Tiers),
        serve_params: &[
            Param::new("allocator", Value::Choice, "the allocation recomputed every period")
                .default("baa")
                .choices(&["baa", "drf", "fq"]),
            Param::new("period", Value::Duration, "the re-allocation period").default("1s").range(above(0.0), None),
            Param::new("window", Value::Duration, "the hit-ratio window (at least the period)")
                .default("2s")
                .range(at(60e-9), None),
            Param::new("hit_ratios", Value::Fractions, "start from the allocation for these hit ratios")
                .range(at(0.0), at(1.0)),
            Param::new("hdd_iops", Value::Rate, "the slow tier's capacity (default: [tiers.slow] iops)")
                .range(above(0.0), None),
            Param::new("ssd_iops", Value::Rate, "the fast tier's capacity (default: [tiers.fast] iops)")
                .range(above(0.0), None),
        ],
        serve: true,
        back_end: None,
        from_tenants: &[],
        targets: &[],
    },
];

/// The options of `storqos simulate` and `storqos serve` that give policy parameters, in
/// the order their `--help` lists them.
pub const OPTIONS: &[CliOption] = &[
    CliOption {
        key: "weights",
        flag: "--weights",
        count: false,
        help: "Per-tenant weights (wf2q, sfq, yfq, mclock), in tenant order, e.g. 2,1.",
        commands: BOTH,
    },
    CliOption {
        key: "depth",
        flag: "--depth",
        count: true,
        help: "SFQ(D) dispatch depth D.",
        commands: &[Command::Simulate],
    },
    CliOption {
        key: "deadlines",
        flag: "--deadline",
        count: false,
        help: "edf: per-tenant relative deadlines, in tenant order (10ms,50ms); miser, rtt-fq: the one deadline δ of \
               the primary class.",
        commands: BOTH,
    },
    CliOption {
        key: "cmin",
        flag: "--cmin",
        count: false,
        help: "miser / rtt-fq: primary-class capacity Cmin (IOPS).",
        commands: BOTH,
    },
    CliOption {
        key: "slo",
        flag: "--slo",
        count: false,
        help: "Per-tenant SLOs for sarc+avatar & co, in tenant order: web:160iops@400ms,oltp:190iops@900ms.",
        commands: BOTH,
    },
    CliOption {
        key: "percentile",
        flag: "--percentile",
        count: false,
        help: "SLO latency percentile (default 95).",
        commands: BOTH,
    },
    CliOption {
        key: "period",
        flag: "--period",
        count: false,
        help: "sarc+*: SARC credit period T_SARC (default 100ms).",
        commands: BOTH,
    },
    CliOption {
        key: "control_window",
        flag: "--control-window",
        count: false,
        help: "sarc+*: AVATAR / Facade control window (default 1s).",
        commands: BOTH,
    },
    CliOption {
        key: "facade_overload",
        flag: "--facade-overload",
        count: false,
        help: "sarc+facade: how Facade detects overload: 'class' (default: any class above its rate) or 'total' (the \
               sum of arrivals above the sum of rates).",
        commands: BOTH,
    },
    CliOption {
        key: "reservations",
        flag: "--reservations",
        count: false,
        help: "mclock: per-tenant reservations in IOPS, e.g. 300,0,100.",
        commands: BOTH,
    },
    CliOption {
        key: "limits",
        flag: "--limits",
        count: false,
        help: "mclock: per-tenant limits in IOPS (none = no limit), e.g. none,1k.",
        commands: BOTH,
    },
    CliOption {
        key: "at_limit",
        flag: "--at-limit",
        count: false,
        help: "mclock: a request beyond its tenant's limit waits (wait, the default), is served when the device would \
               idle (allow), or is refused at once for the client to retry (reject, or reject:50ms to let 50 ms of \
               requests ahead of the limit wait).",
        commands: BOTH,
    },
];
