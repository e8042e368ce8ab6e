//! `--from-logs`: whole log files (or a pasted excerpt) as a feed, every
//! line stamped by its own time, so that a check after the fact folds them
//! like a replay. vLLM prints `MM-DD HH:MM:SS` with no year: the year is
//! that of the file's own dated lines (LMCache, glog, `tracing`) where it
//! has some, else the file's modification year (said in the warnings). Lines
//! without a stamp (uvicorn, tracebacks) take the last stamp before them
//! in their file; a file with no stamp at all (most proxies) is placed at
//! the start, and that is said too.

use crate::cli::Inputs;
use crate::error::{Error, Result};
use crate::feed::{LogOrigin, Msg, TailCounts, TailState};
use crate::logs::vllm::parse_vllm_line;
use crate::traces::anchor;

/// The feed of a set of log files, and what could not be known from them.
#[derive(Debug, Default)]
pub struct LogFiles {
    pub logs: Vec<(LogOrigin, String)>,
    pub msgs: Vec<Msg>,
    pub notes: Vec<String>,
    /// Time of the last line (the end of the check).
    pub end: f64,
}

/// Reads every `--*-log` file of `inputs` from its start.
pub fn read_log_files(inputs: &Inputs) -> Result<LogFiles> {
    let mut logs: Vec<(LogOrigin, String)> = Vec::new();
    logs.extend(inputs.prefill_log.iter().enumerate().map(|(i, p)| (LogOrigin::Prefill(i), p.clone())));
    logs.extend(inputs.decode_log.iter().enumerate().map(|(i, p)| (LogOrigin::Decode(i), p.clone())));
    logs.extend(inputs.proxy_log.iter().map(|p| (LogOrigin::Proxy, p.clone())));
    if logs.is_empty() {
        return Err(Error::usage(
            "--from-logs needs at least one of --prefill-log, --decode-log, --proxy-log",
        ));
    }
    let mut out = LogFiles { logs: logs.clone(), ..LogFiles::default() };
    // (time, file order, line order, origin, text)
    let mut lines: Vec<(f64, usize, usize, LogOrigin, String)> = Vec::new();
    // Files without a single stamp (most proxies): (file order, lines).
    let mut unstamped: Vec<(usize, Vec<(usize, String)>)> = Vec::new();
    for (k, (origin, path)) in logs.iter().enumerate() {
        let text = if path == "-" {
            std::io::read_to_string(std::io::stdin()).map_err(|e| Error::usage(format!("stdin: {e}")))?
        } else {
            let bytes = std::fs::read(path).map_err(|e| Error::usage(format!("{path}: {e}")))?;
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let mtime = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        let anchor_at = mtime.unwrap_or_else(|| crate::clock::Clock::now(&crate::clock::SystemClock));
        let (mut last, mut first_stamp, mut pending) = (None::<f64>, None::<f64>, Vec::new());
        let (mut n_stamped, mut yearless) = (0usize, false);
        let stamps: Vec<_> = text
            .lines()
            .map(|line| parse_vllm_line(line).and_then(|l| Some((l.timestamp?, l.year))))
            .collect();
        // A line that carries its year (LMCache, glog, `tracing`) dates the
        // yearless vLLM lines near it better than the file's mtime does.
        let mut dated = stamps
            .iter()
            .flatten()
            .find_map(|(ts, y)| y.and_then(|y| anchor(*ts, anchor_at, Some(i32::from(y)))));
        let year_from_lines = dated.is_some();
        for (j, (line, stamp)) in text.lines().zip(&stamps).enumerate() {
            let t = stamp.and_then(|(ts, year)| match year {
                Some(y) => {
                    let t = anchor(ts, anchor_at, Some(i32::from(y)));
                    dated = t.or(dated);
                    t
                }
                None => {
                    yearless = true;
                    anchor(ts, dated.unwrap_or(anchor_at), None)
                }
            });
            if let Some(t) = t {
                n_stamped += 1;
                first_stamp.get_or_insert(t);
                last = Some(t);
            }
            match last {
                Some(t) => lines.push((t, k, j, *origin, line.to_string())),
                None => pending.push((j, line.to_string())),
            }
        }
        // Lines before the first stamp happened at about that stamp.
        let lead = first_stamp.unwrap_or(f64::NEG_INFINITY);
        if n_stamped == 0 {
            unstamped.push((k, pending));
            continue;
        }
        lines.extend(pending.into_iter().map(|(j, l)| (lead, k, j, *origin, l)));
        // Router (`tracing`) stamps carry their year.
        if yearless && year_from_lines {
            let year = crate::traces::year_of(last.unwrap_or(anchor_at));
            out.notes
                .push(format!("{path}: vLLM stamps carry no year; took {year} from the file's dated lines"));
        } else if mtime.is_some() && yearless {
            let year = crate::traces::year_of(last.unwrap_or(anchor_at));
            out.notes.push(format!(
                "{path}: vLLM stamps carry no year; assumed {year} (the file's modification time)"
            ));
        }
    }
    // An unstamped file cannot be ordered against stamped ones; placing it
    // anywhere would invent joins. It is read only when nothing has stamps.
    let any_stamped = !lines.is_empty();
    for (k, pending) in unstamped {
        let path = &logs[k].1;
        if any_stamped {
            out.notes.push(format!(
                "{path}: no timestamps, so its lines cannot be ordered against the other logs: not used"
            ));
        } else {
            out.notes.push(format!("{path}: no timestamps: read in file order, times unknown"));
            let origin = logs[k].0;
            lines.extend(pending.into_iter().map(|(j, l)| (f64::NEG_INFINITY, k, j, origin, l)));
        }
    }
    let start = lines.iter().map(|l| l.0).filter(|t| t.is_finite()).fold(f64::INFINITY, f64::min);
    let start = if start.is_finite() { start } else { anchor_at_now() };
    for l in &mut lines {
        if !l.0.is_finite() {
            l.0 = start;
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut i = 0;
    while i < lines.len() {
        let (t, k) = (lines[i].0, lines[i].1);
        let mut batch = Vec::new();
        while i < lines.len() && lines[i].0 == t && lines[i].1 == k {
            batch.push(std::mem::take(&mut lines[i].4));
            i += 1;
        }
        let source = logs[k].0;
        out.msgs.push(Msg::LogLines {
            source,
            at: t,
            lines: batch,
            state: TailState::Following,
            counts: TailCounts::default(),
        });
        out.msgs.push(Msg::LogsPolled { at: t });
        out.end = t;
    }
    if !logs.iter().any(|(o, _)| matches!(o, LogOrigin::Prefill(_))) {
        out.notes.push("no prefill log: whether a decode request was prefilled is only known from its kv_transfer_params".into());
    }
    if !logs.iter().any(|(o, _)| matches!(o, LogOrigin::Decode(_))) {
        out.notes.push("no decode log: no request can be decided loaded or missed".into());
    }
    Ok(out)
}

fn anchor_at_now() -> f64 {
    crate::clock::Clock::now(&crate::clock::SystemClock)
}

impl LogFiles {
    /// The files as a recording with no endpoints, so that the one player
    /// paces them on screen (`replay --from-logs`): seek, pause, speed.
    pub fn into_recording(self, window_secs: f64) -> crate::record::Recording {
        let started = self.msgs.first().map_or(self.end, Msg::at);
        let session = super::Session {
            started,
            endpoints: Vec::new(),
            router: None,
            logs: self.logs,
            iface: None,
            kv_model: None,
            kv_cache_dtype: None,
            window_secs,
            clock_speed: 1.0,
            clock_origin: None,
            show_prompts: false,
            collect: None,
        };
        crate::record::Recording {
            session,
            version: crate::record::VERSION,
            messages: self.msgs,
            broken: None,
        }
    }
}
