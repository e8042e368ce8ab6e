//! vLLM prints `MM-DD HH:MM:SS` with no year and no zone. The year comes
//! from the read time (UTC); the zone is taken as UTC, which holds for the
//! usual container and keeps every instance on one scale.

use crate::logs::vllm::Stamp;

const DAY: i64 = 86_400;

/// Unix seconds of `stamp`, in the year of `at` (or `year` when fixed).
/// A December stamp read in January belongs to the previous year, a
/// January stamp read in December (clock skew) to the next. `None` for an
/// impossible date, so the caller falls back to the read time.
pub fn anchor(stamp: Stamp, at: f64, year: Option<i32>) -> Option<f64> {
    let (mo, d, h, mi, s) = stamp;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let y = match year {
        Some(y) => y,
        None => {
            if !at.is_finite() {
                return None;
            }
            let days = (at / DAY as f64).floor();
            if days.abs() > 1e8 {
                return None;
            }
            let (ay, am, _) = civil_from_days(days as i64);
            match (mo, am) {
                (12, 1) => ay - 1,
                (1, 12) => ay + 1,
                _ => ay,
            }
        }
    };
    let days = days_from_civil(y, mo.into(), d.into());
    Some((days * DAY + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s)) as f64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The `MM-DD HH:MM:SS` (UTC) vLLM would print at unix seconds `t`.
pub fn stamp_at(t: f64) -> Stamp {
    let secs = t.floor() as i64;
    let (_, m, d) = civil_from_days(secs.div_euclid(DAY));
    let s = secs.rem_euclid(DAY);
    (m as u8, d as u8, (s / 3600) as u8, (s % 3600 / 60) as u8, (s % 60) as u8)
}

/// The UTC year of unix seconds `t`.
pub fn year_of(t: f64) -> i32 {
    civil_from_days((t / 86_400.0).floor() as i64).0
}

/// (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_stamp() {
        // 06:25:31 on 2026-11-30 UTC; events.jsonl puts the lab around 1796019931.
        let t = anchor((11, 30, 6, 25, 31), 1_796_019_931.0, None);
        assert_eq!(t, Some(1_796_019_931.0));
    }

    #[test]
    fn new_year() {
        // Read on 2027-01-01 00:00:05 UTC, stamped 12-31 23:59:59: last year.
        let at = days_from_civil(2027, 1, 1) as f64 * 86_400.0 + 5.0;
        let t = anchor((12, 31, 23, 59, 59), at, None);
        assert_eq!(t, Some(at - 6.0));
        // Read on 12-31, stamped 01-01 (skewed clock): next year.
        let at = days_from_civil(2026, 12, 31) as f64 * 86_400.0 + 86_399.0;
        assert_eq!(anchor((1, 1, 0, 0, 1), at, None), Some(at + 2.0));
        assert_eq!(anchor((13, 1, 0, 0, 0), at, None), None);
        assert_eq!(anchor((1, 1, 0, 0, 0), f64::NAN, None), None);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(stamp_at(1_796_019_931.7), (11, 30, 6, 25, 31));
    }
}
