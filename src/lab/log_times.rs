//! When each line of a recorded log was printed: by its own stamps, or,
//! for a proxy that prints none, by the answers the ground truth records.

/// Gives each line the time it was printed: vLLM lines carry
/// `MM-DD HH:MM:SS` (UTC in the captures), read with the log parser and
/// anchored to the recording's year; a line without one (uvicorn's access
/// line) was printed before the next stamped line, so it takes that
/// line's second (the previous line's at the end of the file).
pub(super) fn timed_lines(bytes: &[u8], t0: f64) -> Vec<(f64, String)> {
    let text = String::from_utf8_lossy(bytes);
    let stamps: Vec<Option<f64>> = text.lines().map(|l| vllm_timestamp(l, t0)).collect();
    let mut next = vec![None; stamps.len()];
    let mut upcoming = None;
    for (k, ts) in stamps.iter().enumerate().rev() {
        upcoming = ts.or(upcoming);
        next[k] = upcoming;
    }
    let mut t = f64::MIN;
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        // Keep file order: a process printing a second late never moves
        // a line before the one above it.
        if let Some(ts) = stamps[k].or(next[k]) {
            t = t.max(ts);
        }
        out.push((t, line.to_string()));
    }
    out
}

fn vllm_timestamp(line: &str, t0: f64) -> Option<f64> {
    let stamp = crate::logs::vllm::parse_vllm_line(line)?.timestamp?;
    crate::traces::anchor(stamp, t0, None)
}

/// A log whose lines carry the stamps pdtop dates lines by (`stamp_of`:
/// vLLM's, or a `tracing` header such as vllm-router's), each line at the
/// last stamp so far; `None` unless most lines have one (a uvicorn proxy
/// with a stray stamped line is placed by its answers).
pub(super) fn stamped_lines(bytes: &[u8], t0: f64) -> Option<Vec<(f64, String)>> {
    let text = String::from_utf8_lossy(bytes);
    let mut last: Option<f64> = None;
    let mut out = Vec::new();
    let mut stamped = 0;
    for line in text.lines() {
        let t = crate::logs::vllm::stamp_of(line)
            .and_then(|(ts, year)| crate::traces::anchor(ts, t0, year.map(i32::from)));
        if let Some(t) = t {
            last = Some(last.map_or(t, |l| l.max(t)));
            stamped += 1;
        }
        out.push((last, line.to_string()));
    }
    if 2 * stamped < out.len() {
        return None;
    }
    let first = out.iter().find_map(|(t, _)| *t)?;
    Some(out.into_iter().map(|(t, l)| (t.unwrap_or(first), l)).collect())
}

/// The proxy log has no timestamps; its `POST` access line is printed when
/// the decode response starts, so the n-th one is timed at the n-th
/// proxied request's start plus its TTFT (its end when nothing came back),
/// from the ground truth. Other lines (the demo proxy's error report) were
/// printed just before the access line that follows them.
pub(super) fn proxy_lines(bytes: &[u8], requests: Option<&[u8]>, t0: f64) -> Option<Vec<(f64, String)>> {
    let mut times: Vec<f64> = requests
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        // Through the proxy: `mode` in the first captures, `target` in later ones.
        .filter(|v| v["mode"] == "proxy" || v["mode"] == "chat" || v["target"] == "proxy")
        .filter_map(|v| {
            // When the proxy began to answer (`t_answer`, where the capture
            // recorded it: its stream starts once the decode is reached),
            // else the first token's time, else the end.
            let start = v["t_start"].as_f64()?;
            Some(match (v["t_answer"].as_f64(), v["ttft_ms"].as_f64()) {
                (Some(t), _) => t,
                (None, Some(ms)) => start + ms / 1000.0,
                (None, None) => v["t_end"].as_f64().unwrap_or(start),
            })
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let is_post = |l: &str| l.contains("\"POST ") && l.contains(" HTTP/");
    // Answers with nothing to date them: never all at the start.
    if times.is_empty() && lines.iter().any(|l| is_post(l)) {
        return None;
    }
    let mut next = times.into_iter();
    let mut last = t0;
    let mut out: Vec<(f64, String)> = Vec::with_capacity(lines.len());
    for (k, line) in lines.iter().enumerate() {
        if is_post(line) {
            last = next.next().unwrap_or(last);
        } else if !line.starts_with("INFO:") && lines[k + 1..].iter().take(4).any(|l| is_post(l)) {
            // An error report: its access line comes within a few lines.
            let mut peek = next.clone();
            if let Some(t) = peek.next() {
                out.push(((t - 0.001).max(last), line.to_string()));
                continue;
            }
        }
        out.push((last, line.to_string()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_that_stamps_its_lines_is_placed_by_them() {
        // vllm-router 0.1.17 (router-nixl-1p2d): ANSI colours, whole-second UTC.
        let log = "DEBUG: starting\n\x1b[2m2026-12-06 06:33:43\x1b[0m \x1b[31mERROR\x1b[0m failed\nmore\n\x1b[2m2026-12-06 06:33:45\x1b[0m \x1b[32m INFO\x1b[0m ok\n";
        let t = stamped_lines(log.as_bytes(), 1_796_538_763.0).unwrap();
        let at: Vec<f64> = t.iter().map(|(t, _)| *t).collect();
        // 1796538823 is 2026-12-06 06:33:43 UTC; a line without one at the last stamp.
        assert_eq!(at, [1_796_538_823.0, 1_796_538_823.0, 1_796_538_823.0, 1_796_538_825.0]);
        // The demo proxy's uvicorn lines carry none: placed by its answers.
        assert_eq!(
            stamped_lines(b"INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK\n", 0.0),
            None
        );
    }

    #[test]
    fn log_lines_are_timed() {
        // 1796019931 is 2026-11-30 06:25:31 UTC.
        let t = vllm_timestamp(
            "(APIServer pid=3126) INFO 11-30 06:25:31 [request_logger.py:63] Received",
            1_796_000_000.0,
        );
        assert_eq!(t, Some(1_796_019_931.0));
        assert_eq!(vllm_timestamp("INFO:     127.0.0.1:1 - \"GET /metrics\"", 1_796_000_000.0), None);
    }
}
