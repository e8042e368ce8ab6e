//! One series of an answer written back as a line of the exposition text
//! the instance served, so the rest of pdtop reads it as a scrape.

use super::matrix::Label;

/// Labels the server adds to every series of a target: not part of what
/// the instance served.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Writes `name{labels} ` for one series into `out` (cleared first),
/// without the target's own labels and in label order; `false` for a name
/// the text format cannot carry (UTF-8 names of Prometheus 3).
pub(super) fn render_prefix(out: &mut String, name: &str, labels: &[Label<'_>]) -> bool {
    let legal = |s: &str, colon: bool| {
        let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || colon && *c == b':';
        s.as_bytes()
            .split_first()
            .is_some_and(|(c, rest)| !c.is_ascii_digit() && word(c) && rest.iter().all(word))
    };
    out.clear();
    if !legal(name, true) {
        return false;
    }
    out.push_str(name);
    let mut first = true;
    let mut prev: Option<&str> = None;
    // The server writes labels sorted; one out of order is put in place
    // (the text must be the same at every scrape).
    let sorted = labels.windows(2).all(|p| p[0].0 <= p[1].0);
    let mut order: Vec<&Label<'_>>;
    let labels: &mut dyn Iterator<Item = &Label<'_>> = if sorted {
        &mut labels.iter()
    } else {
        order = labels.iter().collect();
        order.sort_by(|a, b| a.0.cmp(&b.0));
        &mut order.into_iter()
    };
    for (k, v) in labels {
        let k = k.as_ref();
        if k == "__name__" || TARGET_LABELS.contains(&k) || !legal(k, false) || prev == Some(k) {
            continue;
        }
        prev = Some(k);
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        let mut rest = v.as_ref();
        while let Some(i) = rest.bytes().position(|b| matches!(b, b'\\' | b'"' | b'\n')) {
            out.push_str(&rest[..i]);
            out.push_str(match rest.as_bytes()[i] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            });
            rest = &rest[i + 1..];
        }
        out.push_str(rest);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    true
}
