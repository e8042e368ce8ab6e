//! Number and time formatting for the screen: short, fixed width where it
//! helps, and never a panic or a `NaN` on screen.

/// Milliseconds from seconds: `87 ms`, `1.24 s`.
pub fn secs(v: Option<f64>) -> String {
    match v {
        Some(s) if s.is_finite() && s < 1.0 => format!("{:.0} ms", s * 1000.0),
        Some(s) if s.is_finite() && s < 100.0 => format!("{s:.2} s"),
        Some(s) if s.is_finite() => format!("{s:.0} s"),
        _ => "n/a".into(),
    }
}

/// A bucket bound in seconds, compactly: `≤40ms`, `≤2.5s`, `+Inf`.
pub fn bound_secs(b: f64) -> String {
    if b.is_infinite() {
        "+Inf".into()
    } else if b < 1.0 {
        format!("≤{}ms", trim(b * 1000.0))
    } else {
        format!("≤{}s", trim(b))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// An age: `0.4s`, `12s`, `3m`, `2h`.
pub fn age(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        "?".into()
    } else if secs < 10.0 {
        format!("{secs:.1}s")
    } else if secs < 120.0 {
        format!("{secs:.0}s")
    } else if secs < 7200.0 {
        format!("{:.0}m", secs / 60.0)
    } else {
        format!("{:.0}h", secs / 3600.0)
    }
}

/// A count: `950`, `12.3k`, `4.1M`.
pub fn count(v: f64) -> String {
    if !v.is_finite() {
        "n/a".into()
    } else if v.abs() < 10_000.0 {
        format!("{v:.0}")
    } else if v.abs() < 10_000_000.0 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{:.1}M", v / 1e6)
    }
}

/// A 0..1 fraction as a percentage, `n/a` when unknown.
pub fn pct(v: Option<f64>) -> String {
    match v {
        Some(f) if f.is_finite() => format!("{:.1}%", (f * 100.0).clamp(0.0, 100.0)),
        _ => "n/a".into(),
    }
}

/// Bytes with binary units.
pub fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if !v.is_finite() || v < 0.0 {
        return "n/a".into();
    }
    let mut v = v;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{v:.0} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// Wall-clock time of a unix timestamp, UTC: `06:25:31`.
pub fn clock(t: f64) -> String {
    if !t.is_finite() || t <= 0.0 {
        return "--:--:--".into();
    }
    let s = t.floor() as i64;
    let day_secs = s.rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", day_secs / 3600, (day_secs / 60) % 60, day_secs % 60)
}

/// Columns `text` takes on screen.
pub fn width(text: &str) -> usize {
    ratatui::text::Span::raw(text).width()
}

/// `text` cut to `cols` at a word boundary, with `…` where it was cut: a
/// number is shown whole or not at all. A first word wider than `cols`
/// leaves only the `…`.
pub fn shorten(text: &str, cols: usize) -> String {
    if width(text) <= cols {
        return text.to_string();
    }
    if cols == 0 {
        return String::new();
    }
    let mut kept = words_that_fit(text, cols);
    // A number whose unit or meaning was cut goes with it: `5.3 GB`
    // is never shown as `5.3…`.
    while kept.last().is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit())) {
        kept.pop();
    }
    let out: String = kept.concat();
    let out = out.trim_end().trim_end_matches([':', ',', '·', '(', '=']).trim_end();
    format!("{out}…")
}

/// The leading words of `text` (each with the spaces after it) that fit
/// in `cols` with one column after them for the `…`, their trailing
/// whitespace not counted.
fn words_that_fit(text: &str, cols: usize) -> Vec<&str> {
    let mut kept: Vec<&str> = Vec::new();
    // The kept words' width, and that of the whitespace they end in: each
    // word is measured once (this runs for many rows of every frame).
    let (mut total, mut trailing) = (0, 0);
    for word in text.split_inclusive(' ') {
        let (w, bare) = (width(word), width(word.trim_end()));
        let trailing_next = if word.trim_end().is_empty() { trailing + w } else { w - bare };
        if total + w - trailing_next + 1 > cols {
            break;
        }
        (total, trailing) = (total + w, trailing_next);
        kept.push(word);
    }
    kept
}

/// `text` cut to `cols` columns with `…` where it was cut, for a name with
/// no words to keep (an id, a path).
pub fn ellipsis(text: &str, cols: usize) -> String {
    if width(text) <= cols {
        return text.to_string();
    }
    let mut out = String::new();
    for c in text.chars() {
        if width(&out) + width(&c.to_string()) + 1 > cols {
            break;
        }
        out.push(c);
    }
    if cols == 0 { out } else { format!("{out}…") }
}

/// The first of `forms` (the richest first) whose spans fit in `cols`; the
/// last one when none does.
pub fn fit<'a>(forms: Vec<Vec<ratatui::text::Span<'a>>>, cols: usize) -> Vec<ratatui::text::Span<'a>> {
    let wide = |f: &Vec<ratatui::text::Span<'a>>| f.iter().map(|s| s.width()).sum::<usize>();
    let n = forms.len();
    forms
        .into_iter()
        .enumerate()
        .find(|(i, f)| wide(f) <= cols || i + 1 == n)
        .map(|(_, f)| f)
        .unwrap_or_default()
}

/// Whole segments of a line that fit in `cols`: while too wide, the
/// segment of the lowest rank (the last of equals) goes, and a `…` says
/// something went. A number is never cut; its segment goes whole.
pub fn keep_whole<'a>(
    segments: Vec<(u8, Vec<ratatui::text::Span<'a>>)>,
    cols: usize,
) -> Vec<ratatui::text::Span<'a>> {
    let wide = |s: &[(u8, Vec<ratatui::text::Span<'a>>)]| {
        s.iter().flat_map(|(_, spans)| spans).map(|x| x.width()).sum::<usize>()
    };
    let mut segments = segments;
    let mut dropped = false;
    while wide(&segments) + usize::from(dropped) > cols && segments.len() > 1 {
        let lowest = segments.iter().map(|(r, _)| *r).min().unwrap_or(0);
        let at = segments.iter().rposition(|(r, _)| *r == lowest).unwrap_or(segments.len() - 1);
        segments.remove(at);
        dropped = true;
    }
    let mut out: Vec<ratatui::text::Span<'a>> = segments.into_iter().flat_map(|(_, s)| s).collect();
    if dropped {
        out.push(ratatui::text::Span::raw("…"));
    }
    out
}

/// Milliseconds from seconds without the space: `87ms`, `1.24s` (where
/// columns are short).
pub fn secs_tight(v: Option<f64>) -> String {
    secs(v).replace(' ', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(secs(Some(0.0874)), "87 ms");
        assert_eq!(secs(Some(1.236)), "1.24 s");
        assert_eq!(secs(Some(f64::NAN)), "n/a");
        assert_eq!(bound_secs(0.04), "≤40ms");
        assert_eq!(bound_secs(2.5), "≤2.5s");
        assert_eq!(bound_secs(f64::INFINITY), "+Inf");
        assert_eq!(pct(Some(0.013)), "1.3%");
        assert_eq!(pct(Some(7.0)), "100.0%");
        assert_eq!(pct(None), "n/a");
        assert_eq!(count(12345.0), "12.3k");
        assert_eq!(bytes(983_128.0), "960.1 KiB");
        assert_eq!(clock(1_796_019_931.5), "06:25:31");
        assert_eq!(age(0.42), "0.4s");
        assert_eq!(secs_tight(Some(0.0874)), "87ms");
    }

    proptest::proptest! {
        /// The kept words measured once give what measuring every prefix did.
        #[test]
        fn words_fit_as_their_whole_prefix_would(
            text in "[a-z0-9 .:,·(=日\u{3000}\u{200b}]{0,40}",
            cols in 0usize..44,
        ) {
            let mut by_prefix: Vec<&str> = Vec::new();
            for word in text.split_inclusive(' ') {
                let next: String = by_prefix.iter().copied().chain([word]).collect();
                if width(next.trim_end()) + 1 > cols {
                    break;
                }
                by_prefix.push(word);
            }
            proptest::prop_assert_eq!(words_that_fit(&text, cols), by_prefix);
        }
    }

    #[test]
    fn shortened_by_words_never_inside_a_number() {
        let t = "⚠ metrics count 14 silent miss(es), traces 13";
        assert_eq!(shorten(t, 80), t);
        assert_eq!(shorten(t, 44), "⚠ metrics count 14 silent miss(es), traces…");
        assert_eq!(shorten("20 of 49 folders, 5.3 GB", 23), "20 of 49 folders…");
        assert_eq!(shorten("moved nothing: lab-a-0, lab-a-1", 26), "moved nothing: lab-a-0…");
        assert_eq!(shorten(t, 42), "⚠ metrics count 14 silent miss(es)…");
        assert_eq!(shorten(t, 17), "⚠ metrics count…");
        assert_eq!(shorten("12345", 3), "…");
        // A zero-width word is no whitespace: the space before it counts.
        assert_eq!(shorten("ab \u{200b} cd", 3), "ab…");
        assert_eq!(ellipsis("chatcmpl-8cbfd94d781597f", 10), "chatcmpl-…");
    }

    #[test]
    fn segments_go_whole_lowest_rank_first() {
        use ratatui::text::Span;
        let segs = || {
            vec![
                (9, vec![Span::raw("ROUTER ")]),
                (1, vec![Span::raw("p50 1.22 s ")]),
                (5, vec![Span::raw("err 3")]),
            ]
        };
        let text = |v: Vec<Span>| v.iter().map(|s| s.content.to_string()).collect::<String>();
        assert_eq!(text(keep_whole(segs(), 80)), "ROUTER p50 1.22 s err 3");
        assert_eq!(text(keep_whole(segs(), 20)), "ROUTER err 3…");
        assert_eq!(text(keep_whole(segs(), 8)), "ROUTER …");
    }

    #[test]
    fn fit_takes_the_richest_form_that_fits() {
        use ratatui::text::Span;
        let forms = || vec![vec![Span::raw("p50 312 ms  n=37")], vec![Span::raw("p50 312ms n=37")]];
        assert_eq!(fit(forms(), 16)[0].content, "p50 312 ms  n=37");
        assert_eq!(fit(forms(), 15)[0].content, "p50 312ms n=37");
        assert_eq!(fit(forms(), 3)[0].content, "p50 312ms n=37");
    }
}
