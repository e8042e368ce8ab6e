//! Small text scanners for the connector and proxy matchers: a number or
//! a word after a key, a value in a Python dict repr. Never panic, never
//! allocate unless they return text.

/// Leading number of `s` (sign, digits, one dot, exponent).
pub(crate) fn lead_num(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut end = 0;
    if matches!(b.first(), Some(b'-' | b'+')) {
        end = 1;
    }
    let digits_from = end;
    while end < b.len() && (b[end].is_ascii_digit() || b[end] == b'.' || b[end] == b'e') {
        end += 1;
    }
    let t = s[..end].trim_end_matches(['.', 'e']);
    if t.len() <= digits_from {
        return None;
    }
    t.parse().ok()
}

/// The number right after the first `key`.
pub(crate) fn num_after(s: &str, key: &str) -> Option<f64> {
    s.find(key).and_then(|i| lead_num(&s[i + key.len()..]))
}

/// The word (up to a space or one of `,;)`) after the first `key`.
pub(crate) fn word_after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let r = &s[s.find(key)? + key.len()..];
    let end = r.find([' ', ',', ';', ')']).unwrap_or(r.len());
    Some(&r[..end]).filter(|w| !w.is_empty())
}

/// `'key': value` in a Python dict repr: the raw value text (quotes kept off).
pub(crate) fn dict_raw<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let pat_at = {
        let mut from = 0;
        loop {
            let i = s[from..].find(key)? + from;
            let ok = i > 0 && s.as_bytes()[i - 1] == b'\'' && s[i + key.len()..].starts_with("': ");
            if ok {
                break i + key.len() + 3;
            }
            from = i + key.len();
        }
    };
    let r = &s[pat_at..];
    if let Some(q) = r.strip_prefix('\'') {
        return q.find('\'').map(|e| &q[..e]);
    }
    if r.starts_with('[') {
        return r.find(']').map(|e| &r[..=e]);
    }
    let end = r.find([',', '}']).unwrap_or(r.len());
    Some(r[..end].trim())
}

pub(crate) fn dict_bool(s: &str, key: &str) -> Option<bool> {
    match dict_raw(s, key)? {
        "True" | "true" => Some(true),
        "False" | "false" => Some(false),
        _ => None,
    }
}

pub(crate) fn dict_num(s: &str, key: &str) -> Option<f64> {
    dict_raw(s, key).and_then(lead_num)
}

/// Items of a `[a, b, c]` list (None for `None` or a cut list).
pub(crate) fn list_len(raw: &str) -> Option<f64> {
    let body = raw.strip_prefix('[')?.strip_suffix(']')?.trim();
    Some(if body.is_empty() { 0.0 } else { body.split(',').count() as f64 })
}

/// The strings of a Python `['a', 'b']` list or `{'a'}` set at the start of
/// `s`, as `repr` prints request ids (Mooncake's `err_reqs`, the
/// scheduler's `Request IDs: {...}`); empty when `s` holds no such list.
pub(crate) fn py_strs(s: &str) -> Vec<&str> {
    let s = s.trim_start();
    let close = match s.as_bytes().first() {
        Some(b'[') => ']',
        Some(b'{') => '}',
        _ => return Vec::new(),
    };
    let Some(end) = s.find(close) else {
        return Vec::new();
    };
    s[1..end].split(',').map(|i| i.trim().trim_matches(['\'', '"'])).filter(|i| !i.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans() {
        assert_eq!(lead_num("-64 x"), Some(-64.0));
        assert_eq!(lead_num("0.010ms"), Some(0.01));
        assert_eq!(lead_num("4. Num"), Some(4.0));
        assert_eq!(lead_num("-"), None);
        let d = "{'do_remote_decode': True, 'remote_block_ids': [5, 6], 'remote_host': '1.2.3.4', 'remote_port': 5579}";
        assert_eq!(dict_bool(d, "do_remote_decode"), Some(true));
        assert_eq!(dict_raw(d, "remote_host"), Some("1.2.3.4"));
        assert_eq!(dict_num(d, "remote_port"), Some(5579.0));
        assert_eq!(dict_raw(d, "remote_block_ids").and_then(list_len), Some(2.0));
        assert_eq!(py_strs("['973ca62f1bc3666d'] failed"), ["973ca62f1bc3666d"]);
        assert_eq!(py_strs("{'a-1', 'b'}"), ["a-1", "b"]);
        assert!(py_strs("[] x").is_empty() && py_strs("none").is_empty() && py_strs("['cut").is_empty());
    }
}
