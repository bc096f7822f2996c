//! Kubernetes-style byte quantities (`64Mi`), read by the manifest and the
//! egress rules alike: a leaf below both.

use std::str::FromStr;

/// Parses a Kubernetes-style byte quantity: `64Mi`, `1Gi`, `512Ki`, `100M`, `4096`.
pub fn parse_quantity(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let n = u64::from_str(digits).map_err(|_| format!("{s:?} is not a quantity like 64Mi"))?;
    let mult: u64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => {
            return Err(format!(
                "{s:?} has an unknown unit {suffix:?} (use Ki, Mi or Gi)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}
