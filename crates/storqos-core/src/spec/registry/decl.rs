//! What the registry is made of: a policy ([`Policy`]), the parameters it takes
//! ([`Param`], each a [`Value`] type with a default and a range), the builder of its spec
//! ([`Form`]) and the command-line options that give its parameters ([`CliOption`]).

use serde::Serialize;

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
    /// One word of the [`Param`]'s `choices`.
    Choice,
    /// Per-tenant numbers, in tenant order (`2,1` or `[2, 1]`).
    Numbers,
    /// Per-tenant rates in IOPS (`300,0,1.5k`), `none` where a tenant has none.
    Rates,
    /// Per-tenant rates in bytes per second (`100MiB/s,none`), `none` where a tenant has none.
    ByteRates,
    /// Per-tenant sizes in bytes (`64KiB,none`), `none` where a tenant has none.
    Sizes,
    /// Per-tenant words, each one of the [`Param`]'s `choices` (`client,recovery`).
    Choices,
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
    pub const ALL: [Value; 21] = [
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
        Value::ByteRates,
        Value::Sizes,
        Value::Choices,
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
            Value::ByteRates => "bytes per second, one per tenant in tenant order (none = no value): 100MiB/s,none",
            Value::Sizes => "bytes with an optional unit, one per tenant in tenant order (none = no value): 64KiB,none",
            Value::Choices => "listed words, one per tenant in tenant order: client,recovery",
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
pub(crate) const fn above(value: f64) -> Option<Bound> {
    Some(Bound { value, inclusive: false })
}

/// `>= v` (or `<= v` as a maximum).
pub(crate) const fn at(value: f64) -> Option<Bound> {
    Some(Bound { value, inclusive: true })
}

/// `< v` as a maximum.
pub(crate) const fn below(value: f64) -> Option<Bound> {
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
    pub(crate) const fn new(key: &'static str, value: Value, help: &'static str) -> Param {
        Param { key, value, default: None, min: None, max: None, choices: &[], required: false, help }
    }

    pub(crate) const fn default(mut self, default: &'static str) -> Param {
        self.default = Some(default);
        self
    }

    pub(crate) const fn range(mut self, min: Option<Bound>, max: Option<Bound>) -> Param {
        self.min = min;
        self.max = max;
        self
    }

    pub(crate) const fn choices(mut self, choices: &'static [&'static str]) -> Param {
        self.choices = choices;
        self
    }

    pub(crate) const fn required(mut self) -> Param {
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
    /// A system's own settings, each passed to the core under its key (durations in ns
    /// under `KEY_ns`, the capacity as `capacity_iops`): the models of
    /// [`crate::stacks`], whose specs check them as their systems do.
    Settings,
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
    /// The core's kind its spec has ([`crate::spec::SchedulerSpec`]'s `kind`).
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
    /// The systems whose QoS it models, as `storqos advise --target` and `storqos check`
    /// name them (`qemu`, `cgroup`, ...); empty for storqos' own policies.
    pub targets: &'static [&'static str],
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

/// Both commands.
pub(crate) const BOTH: &[Command] = &[Command::Simulate, Command::Serve];
