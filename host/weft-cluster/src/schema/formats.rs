//! The string formats kube-apiserver checks in CRD schemas (go-openapi's
//! strfmt registry), for the common ones; other formats pass unchecked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `s` is of format `f` (`date-time` and `datetime` alike).
pub(crate) fn valid(f: &str, s: &str) -> bool {
    match f.replace('-', "").as_str() {
        "datetime" => date_time(s),
        "date" => date(s),
        "uuid" => uuid(s, None),
        "uuid3" => uuid(s, Some('3')),
        "uuid4" => uuid(s, Some('4')),
        "uuid5" => uuid(s, Some('5')),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => cidr(s),
        "byte" => byte(s),
        "hostname" => hostname(s),
        "mac" => mac(s),
        _ => true,
    }
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// RFC 3339 full-date: `2006-01-02`.
fn date(s: &str) -> bool {
    let p: Vec<&str> = s.split('-').collect();
    matches!(p.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2)
        && (1..=12).contains(&m.parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&d.parse::<u8>().unwrap_or(0)))
}

/// RFC 3339 date-time: `2006-01-02T15:04:05(.frac)?(Z|±hh:mm)`.
fn date_time(s: &str) -> bool {
    let Some((d, t)) = s.split_once(['T', 't', ' ']) else {
        return false;
    };
    if !date(d) || t.len() < 8 {
        return false;
    }
    let (hms, rest) = t.split_at(8);
    let hms_ok = matches!(hms.split(':').collect::<Vec<_>>().as_slice(),
        [h, m, sec] if digits(h, 2) && digits(m, 2) && digits(sec, 2));
    let rest = match rest.strip_prefix('.') {
        Some(r) => r.trim_start_matches(|c: char| c.is_ascii_digit()),
        None => rest,
    };
    let zone_ok = match rest {
        "Z" | "z" => true,
        z if z.len() == 6 && (z.starts_with('+') || z.starts_with('-')) => {
            digits(&z[1..3], 2) && &z[3..4] == ":" && digits(&z[4..], 2)
        }
        _ => false,
    };
    hms_ok && zone_ok
}

fn uuid(s: &str, version: Option<char>) -> bool {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let shape = hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit());
    shape && version.is_none_or(|v| hex.chars().nth(12) == Some(v))
}

fn cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => 32,
        Ok(IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.parse::<u8>().is_ok_and(|b| b <= max)
}

fn byte(s: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

fn hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn formats() {
        assert!(valid("date-time", "2024-01-02T03:04:05Z"));
        assert!(valid("date-time", "2024-01-02T03:04:05.123+02:00"));
        assert!(!valid("date-time", "yesterday"));
        assert!(valid("date", "2024-01-02"));
        assert!(!valid("uuid", "nope"));
        assert!(valid("cidr", "10.0.0.0/8"));
        assert!(valid("int-or-anything", "x"));
    }
}
