//! Kubernetes resource quantities (`2`, `1k`, `500m`, `1Gi`, `1e3`), as far
//! as quota needs them: a value to compare, and the canonical form
//! kube-apiserver prints. A quota message and `status.used`/`status.hard`
//! show quantities that way (`1000` reads `1k`), and a client comparing
//! them with a real cluster's must see the same text.

use serde_json::Value;

/// apimachinery's wording for a string that is no quantity.
pub(crate) const NOT_A_QUANTITY: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

const NANO: i128 = 1_000_000_000;

/// How a quantity was written, which decides how it is printed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// A quantity in billionths (the smallest unit Kubernetes keeps, `1n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    nanos: i128,
    format: Format,
}

impl Quantity {
    /// A count (of pods), printed as kube-apiserver prints counts.
    pub(crate) fn count(n: u64) -> Self {
        Quantity {
            nanos: i128::from(n) * NANO,
            format: Format::DecimalSI,
        }
    }

    /// A quantity from JSON: a string, or a number (which the real decoder
    /// accepts too).
    pub(crate) fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Self::parse(s),
            Value::Number(n) => Self::parse(&n.to_string()),
            _ => None,
        }
    }

    /// Parses `[+-]digits[.digits]suffix`; `None` when apimachinery would
    /// not take it (or it is beyond what 128 bits of billionths hold).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (negative, s) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let end = s
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(end);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if int.len() + frac.len() == 0 || frac.contains('.') {
            return None;
        }
        let (exp10, pow1024, format) = parse_suffix(suffix)?;
        let mut mantissa: i128 = format!("{int}{frac}").parse().ok()?;
        mantissa = mantissa.checked_mul(1024_i128.checked_pow(pow1024)?)?;
        let scale = exp10 + 9 - i32::try_from(frac.len()).ok()?;
        let nanos = scaled(mantissa, scale)?;
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    pub(crate) fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether `self` is more than `other`.
    pub(crate) fn exceeds(&self, other: &Quantity) -> bool {
        self.nanos > other.nanos
    }

    /// Whether the quantity is above zero.
    pub(crate) fn is_positive(&self) -> bool {
        self.nanos > 0
    }

    /// apimachinery's canonical form: the largest suffix that keeps an
    /// integer mantissa, in the format it was written in (binary only for
    /// whole values of 1024 and more, as there).
    pub(crate) fn canonical(&self) -> String {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let v = self.nanos.unsigned_abs();
        if v == 0 {
            return "0".into();
        }
        if self.format == Format::BinarySI
            && v >= 1024 * NANO as u128
            && v.is_multiple_of(NANO as u128)
        {
            return format!("{sign}{}", binary(v / NANO as u128));
        }
        let mut exp = 18;
        while exp > -9 && !v.is_multiple_of(10u128.pow((exp + 9) as u32)) {
            exp -= 3;
        }
        let mantissa = v / 10u128.pow((exp + 9) as u32);
        let suffix = match (self.format, exp) {
            (_, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, e) => decimal_suffix(e).to_string(),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

/// `mantissa × 10^scale` as an integer; a negative scale rounds up, as
/// apimachinery rounds a value finer than `1n`.
fn scaled(mantissa: i128, scale: i32) -> Option<i128> {
    if scale >= 0 {
        return mantissa.checked_mul(10_i128.checked_pow(scale as u32)?);
    }
    let d = 10_i128.checked_pow(scale.unsigned_abs())?;
    Some((mantissa + d - 1) / d)
}

/// (power of ten, power of 1024, format) of a suffix.
fn parse_suffix(s: &str) -> Option<(i32, u32, Format)> {
    const DECIMAL: [(&str, i32); 10] = [
        ("", 0),
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some((_, e)) = DECIMAL.iter().find(|(x, _)| *x == s) {
        return Some((*e, 0, Format::DecimalSI));
    }
    if let Some(i) = BINARY.iter().position(|x| *x == s) {
        return Some((0, i as u32 + 1, Format::BinarySI));
    }
    let exp: i32 = s.strip_prefix(['e', 'E'])?.parse().ok()?;
    Some((exp, 0, Format::DecimalExponent))
}

fn decimal_suffix(exp: i32) -> &'static str {
    match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    }
}

/// A whole number with the largest binary suffix that divides it.
fn binary(mut n: u128) -> String {
    let mut i = 0;
    while i < 6 && n.is_multiple_of(1024) {
        n /= 1024;
        i += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][i];
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s).expect(s).canonical()
    }

    #[test]
    fn prints_as_apimachinery_does() {
        for (input, want) in [
            ("2", "2"),
            ("0", "0"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5k", "1500"),
            ("0.5", "500m"),
            ("500m", "500m"),
            ("2Ki", "2Ki"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512Ki", "512Ki"),
            ("1e3", "1e3"),
            ("-3", "-3"),
            ("+4", "4"),
            ("1M", "1M"),
        ] {
            assert_eq!(canon(input), want, "{input}");
        }
        assert_eq!(Quantity::count(1000).canonical(), "1k");
        assert_eq!(Quantity::count(7).canonical(), "7");
    }

    #[test]
    fn refuses_what_is_no_quantity() {
        for bad in ["", "abc", "1x", "1.2.3", ".", "1K", "e3", "1e"] {
            assert!(Quantity::parse(bad).is_none(), "{bad}");
        }
        assert!(Quantity::parse("2").unwrap().exceeds(&Quantity::count(1)));
        assert!(
            !Quantity::parse("1500m")
                .unwrap()
                .exceeds(&Quantity::count(2))
        );
        assert!(Quantity::count(2).exceeds(&Quantity::parse("1500m").unwrap()));
        assert!(Quantity::parse("-1").unwrap().is_negative());
    }
}
