//! The registry of the built-in policies: for each, the name users give it, the other
//! names it is taken by, what it is, the core kind it builds ([`SchedulerSpec`]'s
//! `kind`), and the parameters it takes, each with its type, default, range and one line
//! of help; beside them the command-line options that give those parameters.
//!
//! This table is the one declaration of a policy outside its scheduler module: the
//! Python layer reads it (as JSON, [`registry_json`]) for `--policy`'s names and
//! aliases, the policy options of `storqos simulate` and `storqos serve`, the keys an
//! experiment file's `[[policy]]` and a gateway config's `[policy]` take, the option an
//! error names for a key, and the generated reference (docs/reference.md). Adding a
//! policy is its scheduler, its [`SchedulerSpec`] variant and one [`Policy`] entry here.
//!
//! User parameters are the ones people write (`deadlines = ["10ms"]`, `cmin = "1.5k"`);
//! the Python layer's builder named by [`Policy::form`] turns them into the core spec,
//! whose own fields ([`SchedulerSpec`]) carry units in their names (`deadline_ns`).

use serde::Serialize;

use crate::spec::SchedulerSpec;

/// What a parameter's value is, as a user writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// `true` or `false`.
    Bool,
    /// A whole number (`4`).
    Count,
    /// A number (`0.4`).
    Number,
    /// A fraction of one, in [0, 1] (`0.75`).
    Fraction,
    /// A rate in IOPS, with an optional SI suffix (`500`, `1.5k`).
    Rate,
    /// A duration with a unit (`10ms`, `1s`; a bare number is the default unit).
    Duration,
    /// A size in bytes with an optional unit (`512KiB`).
    Size,
    /// A percentile (`95`, `99.9`).
    Percent,
    /// One word of [`Param::choices`].
    Choice,
    /// Per-tenant numbers, in tenant order (`2,1` or `[2, 1]`).
    Numbers,
    /// Per-tenant rates in IOPS (`300,0,1.5k`), `none` where a tenant has none.
    Rates,
    /// Per-tenant durations (`10ms,50ms`).
    Durations,
    /// Per-tenant whole numbers (`[8, 4]`).
    Counts,
    /// Per-tenant fractions in [0, 1] (`[0.5, 0.9]`).
    Fractions,
    /// Per-tenant SLOs `NAME:RATEiops@LATENCY` (`web:160iops@400ms,oltp:190iops@900ms`).
    Slos,
    /// Per-tenant workloads `IOPS:RT[:BUCKET]` (`40:35ms:8,20:38ms:4`).
    Workloads,
    /// A number (IOPS per ms of error) or `online`.
    Gain,
    /// `wait`, `allow`, `reject` or `reject:THRESHOLD` (`reject:50ms`).
    AtLimit,
}

impl Value {
    /// Every value type, in the order the reference lists them.
    pub const ALL: [Value; 18] = [
        Value::Bool,
        Value::Count,
        Value::Number,
        Value::Fraction,
        Value::Rate,
        Value::Duration,
        Value::Size,
        Value::Percent,
        Value::Choice,
        Value::Numbers,
        Value::Rates,
        Value::Durations,
        Value::Counts,
        Value::Fractions,
        Value::Slos,
        Value::Workloads,
        Value::Gain,
        Value::AtLimit,
    ];

    /// How the reference describes a value of this type, with an example.
    pub fn describe(self) -> &'static str {
        match self {
            Value::Bool => "true or false",
            Value::Count => "a whole number",
            Value::Number => "a number",
            Value::Fraction => "a fraction in [0, 1]",
            Value::Rate => "IOPS, with an optional SI suffix: 500, 1.5k",
            Value::Duration => "a duration with a unit: 10ms, 1s",
            Value::Size => "bytes with an optional unit: 4096, 512KiB",
            Value::Percent => "a percentile: 95, 99.9",
            Value::Choice => "one of the listed words",
            Value::Numbers => "numbers, one per tenant in tenant order: 2,1",
            Value::Rates => "IOPS, one per tenant in tenant order (none = no value): 300,none,1.5k",
            Value::Durations => "durations, one per tenant in tenant order: 10ms,50ms",
            Value::Counts => "whole numbers, one per tenant in tenant order: [8, 4]",
            Value::Fractions => "fractions in [0, 1], one per tenant in tenant order: [0.5, 0.9]",
            Value::Slos => "SLOs NAME:RATEiops@LATENCY, one per tenant: web:160iops@400ms,oltp:190iops@900ms",
            Value::Workloads => "workloads IOPS:RT[:BUCKET], one per tenant: 40:35ms:8,20:38ms:4",
            Value::Gain => "a number (IOPS per ms of error) or online",
            Value::AtLimit => "wait, allow, reject or reject:THRESHOLD (reject:50ms)",
        }
    }
}

/// A bound of a parameter's range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bound {
    /// The bound's value.
    pub value: f64,
    /// Whether the value itself is in the range.
    pub inclusive: bool,
}

/// `> v`.
const fn above(value: f64) -> Option<Bound> {
    Some(Bound { value, inclusive: false })
}

/// `>= v` (or `<= v` as a maximum).
const fn at(value: f64) -> Option<Bound> {
    Some(Bound { value, inclusive: true })
}

/// `< v` as a maximum.
const fn below(value: f64) -> Option<Bound> {
    Some(Bound { value, inclusive: false })
}

/// One parameter a policy takes, as users write it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Param {
    /// Its key: the keyword of `storqos.simulate` and `policy_spec`, the key of an
    /// experiment file's `[[policy]]` and a gateway config's `[policy]`.
    pub key: &'static str,
    /// What its value is.
    pub value: Value,
    /// What a run uses when it is not given, as a user would write it (None: no
    /// default, either required or without effect when absent).
    pub default: Option<&'static str>,
    /// The least value taken (for lists, of each entry).
    pub min: Option<Bound>,
    /// The greatest value taken (for lists, of each entry).
    pub max: Option<Bound>,
    /// The words a [`Value::Choice`] takes.
    pub choices: &'static [&'static str],
    /// Whether the policy cannot run without it.
    pub required: bool,
    /// One line: what it sets.
    pub help: &'static str,
}

impl Param {
    const fn new(key: &'static str, value: Value, help: &'static str) -> Param {
        Param { key, value, default: None, min: None, max: None, choices: &[], required: false, help }
    }

    const fn default(mut self, default: &'static str) -> Param {
        self.default = Some(default);
        self
    }

    const fn range(mut self, min: Option<Bound>, max: Option<Bound>) -> Param {
        self.min = min;
        self.max = max;
        self
    }

    const fn choices(mut self, choices: &'static [&'static str]) -> Param {
        self.choices = choices;
        self
    }

    const fn required(mut self) -> Param {
        self.required = true;
        self
    }
}

/// Which Python builder turns a policy's user parameters into its core spec (and, for
/// [`Policy::serve_form`], which of the gateway's builders does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// No parameters: `{"kind": KIND}`.
    Plain,
    /// A fair queue: per-tenant `weights`, `by`, `cost`, and the `depth` or `batch` the
    /// policy takes.
    FairQueue,
    /// Per-tenant relative deadlines (`deadlines_ns`, the last for classes beyond).
    Deadlines,
    /// RTT's decomposition at `cmin` for the one deadline δ; with a
    /// [`Policy::back_end`], RTT in front of it (its classes weighted Cmin : ΔC).
    Decomposition,
    /// Per-tenant reservations, weights and limits (tags), with what a request beyond
    /// its limit gets.
    Tags,
    /// Per-tenant workloads and a controller gain, in front of a [`Policy::back_end`].
    LeakyBucket,
    /// Per-class SLOs over a two-level scheduler (upper: credits, lower: EDF).
    TwoLevel,
    /// The gateway's tiers' capacities allocated by hit ratio (config file only).
    Tiers,
    /// The gateway's leaky bucket: its workloads are the config's `[[tenant]]` tables.
    TenantBuckets,
}

/// A policy and what it takes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Policy {
    /// The name users give it (`--policy`, `kind` in files).
    pub name: &'static str,
    /// Its other names (each the same algorithm under its usual name, the core's, or
    /// a seed's): the one table of aliases; nothing else is taken for a policy.
    pub aliases: &'static [&'static str],
    /// The core's kind its spec has ([`SchedulerSpec`]'s `kind`).
    pub kind: &'static str,
    /// What it is, in one line (with the options it needs).
    pub summary: &'static str,
    /// The builder of its spec from [`Policy::params`]; None: not taken by
    /// `storqos simulate`, experiment files or the Python API.
    pub form: Option<Form>,
    /// What it takes there.
    pub params: &'static [Param],
    /// The gateway's own builder and the keys of its config's `[policy]`, where they
    /// differ from [`Policy::form`] and [`Policy::params`]; None: the same.
    pub serve_form: Option<Form>,
    /// The keys of the config's `[policy]` with [`Policy::serve_form`].
    pub serve_params: &'static [Param],
    /// Whether `storqos serve` runs it.
    pub serve: bool,
    /// The policy its classified requests or buckets feed, by name.
    pub back_end: Option<&'static str>,
    /// The parameters that default to the tenants' QoS keys (experiment files'
    /// `[[tenant]]`, the gateway's): each parameter and the keys it is made of.
    pub from_tenants: &'static [(&'static str, &'static [&'static str])],
}

/// Where an option is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// `storqos simulate`.
    Simulate,
    /// `storqos serve`.
    Serve,
}

/// A command-line option that gives a policy parameter.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CliOption {
    /// The parameter's key ([`Param::key`]).
    pub key: &'static str,
    /// The option (`--deadline`).
    pub flag: &'static str,
    /// Whether its value is a whole number (else the text the policy's builder parses).
    pub count: bool,
    /// Its help line.
    pub help: &'static str,
    /// The commands that take it.
    pub commands: &'static [Command],
}

const BOTH: &[Command] = &[Command::Simulate, Command::Serve];

/// The policy a run without one gets (`--policy`'s default).
pub const DEFAULT_POLICY: &str = "fcfs";

/// The keys any policy may be handed without using them: the device's capacity (rtt-fq's
/// total), the SLOs and the percentile a run is judged on.
pub const RUN_PARAMS: [&str; 3] = ["total_capacity", "slo", "percentile"];

/// The keys whose option is not `--` and the key with `-` for `_` (an error about the
/// key names this option).
pub const IRREGULAR_FLAGS: [(&str, &str); 2] = [("deadlines", "--deadline"), ("workloads", "--workload")];

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

/// The policy named `name` or one of its aliases (case-insensitive).
pub fn lookup(name: &str) -> Option<&'static Policy> {
    let key = name.trim().to_lowercase();
    POLICIES.iter().find(|p| p.name == key || p.aliases.contains(&key.as_str()))
}

impl SchedulerSpec {
    /// The core kind of this spec (its JSON `kind`): every variant is named here, so a
    /// new variant does not compile until it has one (and its registry entry, checked
    /// by the tests below).
    pub fn kind(&self) -> &'static str {
        match self {
            SchedulerSpec::Fcfs => "fcfs",
            SchedulerSpec::Edf { .. } => "edf",
            SchedulerSpec::Wf2q { .. } => "wf2q",
            SchedulerSpec::Mclock { .. } => "mclock",
            SchedulerSpec::Sfq { .. } => "sfq",
            SchedulerSpec::Rtt { .. } => "rtt",
            SchedulerSpec::Miser { .. } => "miser",
            SchedulerSpec::SarcAvatar(_) => "sarc_avatar",
            SchedulerSpec::SarcFacade(_) => "sarc_facade",
            SchedulerSpec::FixedAvatar(_) => "fixed_avatar",
            SchedulerSpec::AdaptiveAvatar(_) => "adaptive_avatar",
            SchedulerSpec::Yfq { .. } => "yfq",
            SchedulerSpec::Baa { .. } => "baa",
            SchedulerSpec::Fclb { .. } => "fclb",
        }
    }
}

/// The registry as one JSON document: `{"policies": [...], "options": [...],
/// "default_policy": "...", "run_params": [...], "irregular_flags": {...}, "value_types": {...}}`.
pub fn registry_json() -> String {
    #[derive(Serialize)]
    struct Doc {
        policies: &'static [Policy],
        options: &'static [CliOption],
        default_policy: &'static str,
        run_params: [&'static str; 3],
        irregular_flags: std::collections::BTreeMap<&'static str, &'static str>,
        value_types: Vec<(Value, &'static str)>,
    }
    let doc = Doc {
        policies: POLICIES,
        options: OPTIONS,
        default_policy: DEFAULT_POLICY,
        run_params: RUN_PARAMS,
        irregular_flags: IRREGULAR_FLAGS.into_iter().collect(),
        value_types: Value::ALL.iter().map(|v| (*v, v.describe())).collect(),
    };
    serde_json::to_string(&doc).expect("the registry serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::from_json;

    /// A spec of each core kind, built by the core: every [`SchedulerSpec`] variant.
    const ONE_OF_EACH: [&str; 14] = [
        r#"{"kind":"fcfs"}"#,
        r#"{"kind":"edf","default_deadline_ns":5}"#,
        r#"{"kind":"wf2q"}"#,
        r#"{"kind":"mclock"}"#,
        r#"{"kind":"sfq","depth":1}"#,
        r#"{"kind":"rtt","capacity_iops":10,"deadline_ns":5,"then":{"kind":"wf2q"}}"#,
        r#"{"kind":"miser","capacity_iops":10,"deadline_ns":5}"#,
        r#"{"kind":"sarc_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"sarc_facade","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"fixed_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"adaptive_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"yfq"}"#,
        r#"{"kind":"baa","hdd_iops":200,"ssd_iops":1000,"window_ns":60,"period_ns":1}"#,
        r#"{"kind":"fclb","workloads":[{"iops":40,"rt_ns":35000000}],"then":{"kind":"yfq"}}"#,
    ];

    #[test]
    fn every_core_kind_has_one_registry_entry_and_back() {
        let mut kinds = Vec::new();
        for json in ONE_OF_EACH {
            let spec: SchedulerSpec = from_json("policy", json).unwrap_or_else(|e| panic!("{json}: {e}"));
            spec.validate().unwrap_or_else(|e| panic!("{json}: {e}"));
            let entries: Vec<&str> = POLICIES.iter().filter(|p| p.kind == spec.kind()).map(|p| p.name).collect();
            // rtt's registry entry is rtt-fq (RTT over WF2Q+); each other kind is one policy.
            assert_eq!(entries.len(), 1, "{}: {entries:?}", spec.kind());
            kinds.push(spec.kind());
        }
        for p in POLICIES {
            assert!(kinds.contains(&p.kind), "{} builds kind {}, which the core does not have", p.name, p.kind);
        }
    }

    #[test]
    fn names_and_aliases_are_each_taken_once() {
        let mut seen: Vec<&str> = Vec::new();
        for p in POLICIES {
            for n in std::iter::once(&p.name).chain(p.aliases) {
                assert_eq!(*n, n.to_lowercase(), "{n}: names are lower case (they are looked up so)");
                assert!(!seen.contains(n), "{n} names two policies");
                seen.push(n);
            }
        }
        assert_eq!(lookup(" WF2Q+ ").map(|p| p.name), Some("wf2q"));
        assert!(lookup(DEFAULT_POLICY).is_some_and(|p| p.form.is_some() && p.serve));
        assert_eq!(lookup("fifo").map(|p| p.name), Some("fcfs"));
        assert!(lookup("wfq").is_none(), "WFQ (Demers-Keshav-Shenker) is another algorithm than WF2Q+");
    }

    #[test]
    fn params_options_and_back_ends_agree() {
        for p in POLICIES {
            // A policy without a builder takes nothing there; one with none anywhere is no policy.
            assert!(p.form.is_some() || p.params.is_empty(), "{}", p.name);
            assert!(p.form.is_some() || p.serve_form.is_some(), "{}: built nowhere", p.name);
            assert!(p.serve || p.form.is_some(), "{}: run nowhere", p.name);
            assert_eq!(p.serve_form.is_some(), !p.serve_params.is_empty(), "{}", p.name);
            for params in [p.params, p.serve_params] {
                let mut keys: Vec<&str> = params.iter().map(|q| q.key).collect();
                keys.sort_unstable();
                keys.dedup();
                assert_eq!(keys.len(), params.len(), "{}: a key given twice", p.name);
                for q in params {
                    assert_eq!(q.value == Value::Choice, !q.choices.is_empty(), "{}.{}", p.name, q.key);
                    if let Some(d) = q.default {
                        assert!(q.value != Value::Choice || q.choices.contains(&d), "{}.{}: {d}", p.name, q.key);
                    }
                }
            }
            for (key, _) in p.from_tenants {
                assert!(p.params.iter().any(|q| q.key == *key), "{}: {key} from the tenants, not taken", p.name);
            }
            if let Some(b) = p.back_end {
                assert!(lookup(b).is_some_and(|e| e.name == b), "{}: back end {b} is no policy", p.name);
            }
        }
        // Every option gives a key some policy takes, or one any policy is handed.
        for o in OPTIONS {
            let taken = POLICIES.iter().any(|p| p.params.iter().any(|q| q.key == o.key)) || RUN_PARAMS.contains(&o.key);
            assert!(taken, "{} gives {}, which no policy takes", o.flag, o.key);
            let irregular = IRREGULAR_FLAGS.iter().find(|(k, _)| *k == o.key).map(|(_, f)| *f);
            assert_eq!(o.flag, irregular.unwrap_or(&format!("--{}", o.key.replace('_', "-"))), "{}", o.key);
        }
    }

    /// The defaults the registry shows are the ones the policies use.
    #[test]
    fn defaults_are_the_policies_own() {
        let default = |policy: &str, key: &str| {
            let p = lookup(policy).unwrap();
            p.params.iter().chain(p.serve_params).find(|q| q.key == key).and_then(|q| q.default).unwrap().to_string()
        };
        assert_eq!(default("yfq", "batch"), crate::schedulers::yfq::DEFAULT_BATCH.to_string());
        assert_eq!(default("fclb", "pole"), crate::fclb::tuning::DEFAULT_POLE.to_string());
        assert_eq!(default("fclb", "plant_gain"), crate::fclb::tuning::PAPER_PLANT_GAIN_MS_PER_IOPS.to_string());
        assert_eq!(default("adaptive+avatar", "p_rt"), crate::twolevel::adaptive::DEFAULT_P_RT.to_string());
        assert_eq!(default("adaptive+avatar", "p_inc"), crate::twolevel::adaptive::DEFAULT_P_INC.to_string());
        assert_eq!(default("adaptive+avatar", "p_dec"), crate::twolevel::adaptive::DEFAULT_P_DEC.to_string());
        let ms = crate::twolevel::sarc::DEFAULT_PERIOD / 1_000_000;
        assert_eq!(default("sarc+avatar", "period"), format!("{ms}ms"));
        let s = crate::twolevel::avatar::DEFAULT_WINDOW / 1_000_000_000;
        assert_eq!(default("sarc+avatar", "control_window"), format!("{s}s"));
        let pct = crate::twolevel::slo::DEFAULT_PERCENTILE * 100.0;
        assert_eq!(default("sarc+avatar", "percentile"), format!("{pct}"));
    }

    #[test]
    fn the_json_document_lists_every_policy_with_its_parameters() {
        let doc: serde_json::Value = serde_json::from_str(&registry_json()).unwrap();
        let policies = doc["policies"].as_array().unwrap();
        assert_eq!(policies.len(), POLICIES.len());
        let mclock = policies.iter().find(|p| p["name"] == "mclock").unwrap();
        assert_eq!(mclock["form"], "tags");
        let limits = mclock["params"].as_array().unwrap().iter().find(|q| q["key"] == "limits").unwrap();
        assert_eq!(limits["value"], "rates");
        assert_eq!(limits["min"], serde_json::json!({"value": 0.0, "inclusive": false}));
        assert_eq!(doc["irregular_flags"]["deadlines"], "--deadline");
        assert_eq!(doc["value_types"].as_array().unwrap().len(), Value::ALL.len());
    }
}
