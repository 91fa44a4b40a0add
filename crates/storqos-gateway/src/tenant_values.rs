//! The tenants' values a policy spec may hold (`weights`, `reservations`, `limits`, at
//! any depth of the spec), checked against the ranges the arithmetic tells apart: the
//! configuration checks them when it is read, the control socket when a value changes.

use serde_json::Value;

/// The weights taken (a tenant's share under wf2q, sfq, yfq, mclock), both ends
/// included: up to 10^9, the span of rates (a weight is often an IOPS share: BAA's
/// allocations, rtt-fq's Cmin : ΔC), down to a thousandth. Outside it the arithmetic
/// stops telling the weights apart: `set --weight 1e308` and `5e-324` were taken and
/// served the tenants 1 : 1.
pub const WEIGHT_RANGE: (f64, f64) = (1e-3, 1e9);

/// The rates taken (IOPS) as a reservation or a limit (mclock), both ends included: up
/// to 10^9, one request per ns (storqos' time resolution), down to one request in
/// 1,000 s. A reservation may also be 0 (none), a limit null (none).
pub const RATE_RANGE: (f64, f64) = (1e-3, 1e9);

/// Check one tenant's value of a policy list (`weights`, `reservations`, `limits`)
/// against [`WEIGHT_RANGE`] or [`RATE_RANGE`]; `what` names it in the error. Values that
/// are not numbers are left to the policy's own parser to refuse.
pub(crate) fn check_value(list: &str, what: &str, v: &Value) -> Result<(), String> {
    let (range, unit) = match list {
        "weights" => (WEIGHT_RANGE, ""),
        "reservations" | "limits" => (RATE_RANGE, " IOPS"),
        _ => return Ok(()),
    };
    let Some(x) = v.as_f64() else { return Ok(()) };
    if (list == "reservations" && x == 0.0) || (range.0..=range.1).contains(&x) {
        return Ok(());
    }
    let none = match list {
        "reservations" => " (or 0: none)",
        _ => "",
    };
    Err(format!("{what}: {v} is outside the range taken, {} to {:e}{unit}{none}", range.0, range.1))
}

/// Check every tenant's weight, reservation and limit in a policy spec (at any depth:
/// rtt-fq's and fclb's inner policies too) against [`WEIGHT_RANGE`] and [`RATE_RANGE`].
pub fn check_tenant_values(spec: &Value) -> Result<(), String> {
    match spec {
        Value::Object(o) => {
            for (key, v) in o {
                if let Some(list) =
                    v.as_array().filter(|_| matches!(key.as_str(), "weights" | "reservations" | "limits"))
                {
                    for (i, x) in list.iter().enumerate() {
                        check_value(key, &format!("{key}[{i}]"), x)?;
                    }
                } else {
                    check_tenant_values(v)?;
                }
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(check_tenant_values),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_tenant_values;
    use serde_json::json;

    #[test]
    fn weights_reservations_and_limits_outside_their_range_are_refused() {
        let ok = [
            json!({"kind": "wf2q", "weights": [0.001, 1e9, 2]}),
            json!({"kind": "mclock", "reservations": [0, 0.001, 1e9], "limits": [null, 0.001, 1e9], "weights": [1]}),
            json!({"kind": "rtt", "then": {"kind": "wf2q", "weights": [417, 83]}}),
        ];
        for spec in ok {
            assert_eq!(check_tenant_values(&spec), Ok(()), "{spec}");
        }
        let refused = [
            (
                json!({"kind": "wf2q", "weights": [1, 1e308]}),
                "weights[1]: 1e+308 is outside the range taken, 0.001 to 1e9",
            ),
            (json!({"kind": "wf2q", "weights": [5e-324]}), "weights[0]: 5e-324 is outside"),
            (
                json!({"kind": "mclock", "reservations": [1e-4]}),
                "reservations[0]: 0.0001 is outside the range taken, 0.001 to 1e9 IOPS (or 0: none)",
            ),
            (
                json!({"kind": "mclock", "limits": [null, 2e9]}),
                "limits[1]: 2000000000.0 is outside the range taken, 0.001 to 1e9 IOPS",
            ),
            (json!({"kind": "mclock", "limits": [0]}), "limits[0]: 0 is outside"),
            (
                json!({"kind": "fclb", "then": {"kind": "yfq", "weights": [1e10]}}),
                "weights[0]: 10000000000.0 is outside",
            ),
        ];
        for (spec, needle) in refused {
            let e = check_tenant_values(&spec).unwrap_err();
            assert!(e.starts_with(needle), "{spec}: {e}");
        }
    }
}
