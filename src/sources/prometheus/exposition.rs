//! One series of an answer written back as a line of the exposition text
//! the instance served, so the rest of pdtop reads it as a scrape.

use std::collections::BTreeMap;

/// Labels the server adds to every series of a target: not part of what
/// the instance served.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// `name{labels} ` for one series, without the target's own labels;
/// `None` for a name the text format cannot carry (UTF-8 names of
/// Prometheus 3).
pub(super) fn render_prefix(name: &str, labels: &BTreeMap<String, String>) -> Option<String> {
    let legal = |s: &str, colon: bool| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || colon && c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || colon && c == ':')
    };
    if !legal(name, true) {
        return None;
    }
    let mut out = String::with_capacity(name.len() + 64);
    out.push_str(name);
    let mut first = true;
    for (k, v) in labels {
        if k == "__name__" || TARGET_LABELS.contains(&k.as_str()) || !legal(k, false) {
            continue;
        }
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    Some(out)
}
