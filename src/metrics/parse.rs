//! A lenient parser for the Prometheus text exposition format (0.0.4), as
//! vLLM's prometheus_client writes it.
//!
//! Why our own: prometheus-parse matches names with `\w+`, which has no `:`,
//! so it silently drops every `vllm:` metric. This parser borrows from the
//! input and allocates nothing per sample: a sample keeps its label set as
//! the validated text between the braces, and a label is looked up (and
//! unescaped, if it has to be) only when asked for. It keeps every sample,
//! and skips a malformed line while counting it: one bad line never costs
//! the whole scrape, and it is never silent.

use std::borrow::Cow;

/// The `# TYPE` of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn from_str(s: &str) -> MetricType {
        match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            _ => MetricType::Untyped,
        }
    }
}

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// The text between the braces, already checked to be well formed.
    labels: &'a str,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl<'a> Sample<'a> {
    /// The (unescaped) value of a label, if present.
    pub fn label(&self, key: &str) -> Option<Cow<'a, str>> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The label text as written (between the braces), which identifies the
    /// series within its name for duplicate detection.
    pub fn labels_text(&self) -> &'a str {
        self.labels
    }

    /// Every label, in the order of the text.
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, Cow<'a, str>)> + use<'a> {
        let text = self.labels;
        let mut i = 0;
        std::iter::from_fn(move || {
            let mut found = None;
            // The text was validated when parsed, so this cannot fail.
            scan_label(text, &mut i, &mut |k, v| found = Some((k, v))).ok()?;
            found
        })
    }
}

/// A line that could not be parsed, kept so the UI can say which.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub line_no: usize,
    pub reason: &'static str,
}

/// How many bad lines are kept verbatim; the count goes on past it.
const MAX_BAD_LINES_KEPT: usize = 16;

/// A parsed scrape.
#[derive(Debug, Default)]
pub struct Exposition<'a> {
    pub samples: Vec<Sample<'a>>,
    /// `# TYPE` declarations in order (a scrape has a few hundred; lookups
    /// are rare, so a map would cost more than it saves).
    pub types: Vec<(&'a str, MetricType)>,
    pub bad_lines: Vec<BadLine>,
    pub bad_line_count: usize,
}

impl<'a> Exposition<'a> {
    fn bad(&mut self, line_no: usize, reason: &'static str) {
        self.bad_line_count += 1;
        if self.bad_lines.len() < MAX_BAD_LINES_KEPT {
            self.bad_lines.push(BadLine { line_no, reason });
        }
    }

    /// The declared type of the family a sample name belongs to, resolving
    /// the `_bucket`/`_sum`/`_count`/`_total`/`_created` suffixes.
    pub fn type_of(&self, sample_name: &str) -> MetricType {
        let get = |name: &str| self.types.iter().find(|(n, _)| *n == name).map(|(_, t)| *t);
        if let Some(t) = get(sample_name) {
            return t;
        }
        for suffix in ["_bucket", "_sum", "_count", "_total", "_created"] {
            if let Some(base) = sample_name.strip_suffix(suffix)
                && let Some(t) = get(base)
            {
                return t;
            }
        }
        MetricType::Untyped
    }
}

/// Parses a whole exposition. Never fails: bad lines are skipped and counted.
pub fn parse(text: &str) -> Exposition<'_> {
    parse_names(text, |_| true)
}

/// [`parse`], keeping only the samples whose name `keep` admits: the rest
/// are skipped at their name, their labels and value unread (a bad one
/// among them goes uncounted). A vLLM scrape is mostly series pdtop does
/// not read, and it is parsed every second for each instance.
pub fn parse_names<'a>(text: &'a str, mut keep: impl FnMut(&'a str) -> bool) -> Exposition<'a> {
    let mut out = Exposition {
        // A vLLM scrape has about one sample per 70 bytes.
        samples: Vec::with_capacity(text.len() / 64 + 1),
        ..Default::default()
    };
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw).trim_start();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            parse_comment(rest, &mut out);
            continue;
        }
        if let Some(name) = sample_name(line)
            && !keep(name)
        {
            continue;
        }
        match parse_sample(line) {
            Ok(s) => out.samples.push(s),
            Err(reason) => out.bad(i + 1, reason),
        }
    }
    out
}

fn parse_comment<'a>(rest: &'a str, out: &mut Exposition<'a>) {
    let rest = rest.trim_start();
    if let Some(decl) = rest.strip_prefix("TYPE") {
        let mut parts = decl.split_whitespace();
        if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
            out.types.push((name, MetricType::from_str(kind)));
        }
    }
    // HELP and other comments carry nothing the dashboard needs.
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

/// Name characters by byte: a table lookup, because scanning long
/// `vllm:..._bucket` names is most of the parser's work.
const NAME_CHARS: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b':';
        b += 1;
    }
    t
};

fn is_name_char(b: u8) -> bool {
    NAME_CHARS[b as usize]
}

/// The name a sample line starts with, if it starts with one.
pub(crate) fn sample_name(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    if !is_name_start(bytes[0]) {
        return None;
    }
    let end = bytes.iter().position(|b| !is_name_char(*b)).unwrap_or(bytes.len());
    Some(&line[..end])
}

fn parse_sample(line: &str) -> Result<Sample<'_>, &'static str> {
    let bytes = line.as_bytes();
    if !is_name_start(bytes[0]) {
        return Err("metric name must start with a letter, '_' or ':'");
    }
    let mut i = 1;
    while i < bytes.len() && is_name_char(bytes[i]) {
        i += 1;
    }
    let name = &line[..i];
    let mut labels = "";
    if i < bytes.len() && bytes[i] == b'{' {
        let start = i + 1;
        i = check_labels(line, start)?;
        labels = &line[start..i - 1];
    }
    let rest = &line[i..];
    if !rest.starts_with([' ', '\t']) {
        return Err("expected a space before the value");
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = parse_value(fields.next().ok_or("missing value")?)?;
    let timestamp_ms = match fields.next() {
        Some(ts) => Some(ts.parse::<i64>().map_err(|_| "bad timestamp")?),
        None => None,
    };
    if fields.next().is_some() {
        return Err("unexpected text after the timestamp");
    }
    Ok(Sample { name, labels, value, timestamp_ms })
}

/// Checks `k="v",k2="v2"}` starting after the `{` in one pass, without
/// unescaping anything; returns the index after the `}`.
fn check_labels(line: &str, start: usize) -> Result<usize, &'static str> {
    let bytes = line.as_bytes();
    let mut i = start;
    loop {
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b',') {
            i += 1;
        }
        match bytes.get(i) {
            None => return Err("unterminated label set"),
            Some(b'}') => return Ok(i + 1),
            Some(_) => {}
        }
        let key_start = i;
        while i < bytes.len() && is_name_char(bytes[i]) {
            i += 1;
        }
        if i == key_start {
            return Err("bad label name");
        }
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i + 1 >= bytes.len() || bytes[i] != b'=' || bytes[i + 1] != b'"' {
            return Err("expected =\" after a label name");
        }
        i = skip_label_value(bytes, i + 2)?;
    }
}

/// Skips a quoted value (after its opening quote), checking its escapes;
/// returns the index after the closing quote.
fn skip_label_value(bytes: &[u8], mut i: usize) -> Result<usize, &'static str> {
    while i < bytes.len() {
        let Some(off) = bytes[i..].iter().position(|b| *b == b'"' || *b == b'\\') else {
            break;
        };
        i += off;
        if bytes[i] == b'"' {
            return Ok(i + 1);
        }
        match bytes.get(i + 1) {
            Some(b'\\' | b'"' | b'n') => i += 2,
            _ => return Err("bad escape in label value"),
        }
    }
    Err("unterminated label value")
}

/// Reads one `key="value"` (with surrounding commas and spaces) from a label
/// set's text at `*i`, advancing past it, and hands it to `f`.
fn scan_label<'a>(
    text: &'a str,
    i: &mut usize,
    f: &mut dyn FnMut(&'a str, Cow<'a, str>),
) -> Result<(), &'static str> {
    let bytes = text.as_bytes();
    while *i < bytes.len() && (bytes[*i] == b' ' || bytes[*i] == b',') {
        *i += 1;
    }
    if *i >= bytes.len() {
        return Err("no more labels");
    }
    let key_start = *i;
    while *i < bytes.len() && is_name_char(bytes[*i]) {
        *i += 1;
    }
    if *i == key_start {
        return Err("bad label name");
    }
    let key = &text[key_start..*i];
    while *i < bytes.len() && bytes[*i] == b' ' {
        *i += 1;
    }
    if *i + 1 >= bytes.len() || bytes[*i] != b'=' || bytes[*i + 1] != b'"' {
        return Err("expected =\" after a label name");
    }
    let (value, next) = parse_label_value(text, *i + 2)?;
    *i = next;
    while *i < bytes.len() && (bytes[*i] == b' ' || bytes[*i] == b',') {
        *i += 1;
    }
    f(key, value);
    Ok(())
}

/// Reads a quoted label value (after the opening quote), unescaping
/// `\\`, `\"` and `\n`; borrows when there is nothing to unescape.
fn parse_label_value(line: &str, start: usize) -> Result<(Cow<'_, str>, usize), &'static str> {
    let bytes = line.as_bytes();
    let mut i = start;
    let mut owned: Option<String> = None;
    let mut chunk_start = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let value = match owned {
                    Some(mut s) => {
                        s.push_str(&line[chunk_start..i]);
                        Cow::Owned(s)
                    }
                    None => Cow::Borrowed(&line[start..i]),
                };
                return Ok((value, i + 1));
            }
            b'\\' => {
                let s = owned.get_or_insert_with(String::new);
                s.push_str(&line[chunk_start..i]);
                match bytes.get(i + 1) {
                    Some(b'\\') => s.push('\\'),
                    Some(b'"') => s.push('"'),
                    Some(b'n') => s.push('\n'),
                    _ => return Err("bad escape in label value"),
                }
                i += 2;
                chunk_start = i;
            }
            _ => i += 1,
        }
    }
    Err("unterminated label value")
}

fn parse_value(s: &str) -> Result<f64, &'static str> {
    match s {
        "+Inf" | "Inf" | "inf" | "+inf" => Ok(f64::INFINITY),
        "-Inf" | "-inf" => Ok(f64::NEG_INFINITY),
        "NaN" | "nan" => Ok(f64::NAN),
        _ => s.parse::<f64>().map_err(|_| "bad sample value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vllm_names_labels_and_types() {
        let text = "# HELP vllm:kv_cache_usage_perc KV-cache usage.\n\
# TYPE vllm:kv_cache_usage_perc gauge\n\
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"lab-8b\"} 0.25\n\
# TYPE vllm:time_to_first_token_seconds histogram\n\
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 3.0\n";
        let e = parse(text);
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.samples[0].name, "vllm:kv_cache_usage_perc");
        assert_eq!(e.samples[0].label("model_name").as_deref(), Some("lab-8b"));
        assert_eq!(e.samples[0].value, 0.25);
        assert_eq!(e.type_of("vllm:time_to_first_token_seconds_bucket"), MetricType::Histogram);
        assert_eq!(e.samples[1].label("le").as_deref(), Some("+Inf"));
        assert_eq!(e.bad_line_count, 0);
    }

    #[test]
    fn unescapes_label_values() {
        let e = parse("m{a=\"x\\\\y\",b=\"say \\\"hi\\\"\",c=\"l1\\nl2\"} 1\n");
        let s = &e.samples[0];
        assert_eq!(s.label("a").as_deref(), Some("x\\y"));
        assert_eq!(s.label("b").as_deref(), Some("say \"hi\""));
        assert_eq!(s.label("c").as_deref(), Some("l1\nl2"));
        let keys: Vec<_> = s.labels().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }

    #[test]
    fn special_values_and_timestamps() {
        let e = parse("a +Inf\nb -Inf\nc NaN 1700000000000\nd 1.5e+09\n");
        assert_eq!(e.samples[0].value, f64::INFINITY);
        assert_eq!(e.samples[1].value, f64::NEG_INFINITY);
        assert!(e.samples[2].value.is_nan());
        assert_eq!(e.samples[2].timestamp_ms, Some(1_700_000_000_000));
        assert_eq!(e.samples[3].value, 1.5e9);
    }

    #[test]
    fn bad_lines_are_skipped_and_counted() {
        let e = parse("good 1\n{bad} 2\nalso_bad\nx{a=\"unterminated} 3\nfine{a=\"b\"} 4\n<html>\n");
        let names: Vec<_> = e.samples.iter().map(|s| s.name).collect();
        assert_eq!(names, ["good", "fine"]);
        assert_eq!(e.bad_line_count, 4);
        assert_eq!(e.bad_lines[0].line_no, 2);
    }

    #[test]
    fn lines_of_names_not_kept_are_skipped_unread() {
        let text =
            "kept{a=\"1\"} 1\nskipped{a=\"unterminated} 2\nkept{a=\"unterminated} 3\n{bad} 4\nskipped 5\n";
        let mut asked = Vec::new();
        let e = parse_names(text, |n| {
            asked.push(n.to_string());
            n == "kept"
        });
        assert_eq!(asked, ["kept", "skipped", "kept", "skipped"]);
        let values: Vec<_> = e.samples.iter().map(|s| s.value).collect();
        assert_eq!(values, [1.0]);
        // The kept family's bad line and the nameless one count; the
        // skipped family's is never read.
        assert_eq!(e.bad_line_count, 2);
    }

    #[test]
    fn crlf_and_blank_lines() {
        let e = parse("a 1\r\n\r\n\nb{x=\"y\"} 2\r\n");
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.bad_line_count, 0);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_sample_like_lines(s in "[a-z:_]{1,8}(\\{[a-z]{1,3}=\"[^\"]{0,4}\"?,?\\}?)? ?[-+0-9.eInfNa]{0,6}") {
            let _ = parse(&s);
        }
    }
}
