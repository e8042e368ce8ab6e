//! `pdtop doctor`: read every source once, apply the rules, report.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::DoctorArgs;
use crate::doctor::gather::{self, Sources};
use crate::doctor::{Report, diagnose};
use crate::error::{Error, Result, RuntimeContext};

/// Seconds before an endpoint is given up, unless --timeout says.
const TIMEOUT_SECS: f64 = 2.0;

pub fn doctor(args: &DoctorArgs) -> Result<Report> {
    let i = &args.inputs;
    // Pasted logs alone, as `check --from-logs` reads them: each log is an
    // instance named by its file; nothing live is read.
    let logs_only =
        i.prefill.is_empty() && i.decode.is_empty() && !(i.prefill_log.is_empty() && i.decode_log.is_empty());
    if !logs_only && (i.prefill.is_empty() || i.decode.is_empty()) {
        return Err(Error::Usage(
            "doctor needs --prefill HOST:PORT and --decode HOST:PORT, or only the logs (--prefill-log, --decode-log)"
                .into(),
        ));
    }
    if i.prometheus.is_some() {
        return Err(Error::Usage(
            "doctor reads the instances themselves: give --prefill and --decode, not --prometheus".into(),
        ));
    }
    let proc_root = args.proc_root.clone().unwrap_or_else(|| PathBuf::from("/proc"));
    let timeout = Duration::from_secs_f64(i.timeout.unwrap_or(TIMEOUT_SECS).clamp(0.1, 60.0));
    let named = |eps: &Vec<String>, logs: &Vec<String>| -> Vec<String> {
        if logs_only { logs.iter().map(|l| log_name(l)).collect() } else { eps.clone() }
    };
    let sources = Sources {
        prefill: named(&i.prefill, &i.prefill_log),
        decode: named(&i.decode, &i.decode_log),
        proxy: args.proxy.clone(),
        prefill_log: i.prefill_log.clone(),
        decode_log: i.decode_log.clone(),
        proc_root: proc_root.clone(),
        sys_class_net: i.sys_class_net.clone().unwrap_or_else(|| match i.netns_pid {
            // sysfs is the mounting namespace's: that process's own /sys.
            Some(pid) => proc_root.join(format!("{pid}/root/sys/class/net")),
            None => PathBuf::from("/sys/class/net"),
        }),
        netns_pid: i.netns_pid,
        timeout,
        own_pid: None,
    };
    let mut facts = gather::read_logs(&sources)?;
    if logs_only {
        // What the lines show is all there is: the checks on the servers,
        // their processes and this host did not run.
        for n in facts.instances.iter().map(|x| x.name()).collect::<Vec<_>>() {
            facts.unread(
                format!("endpoints, process and host of {n}"),
                "logs only: no --prefill/--decode given",
            );
        }
    } else {
        let rt =
            tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("doctor runtime")?;
        rt.block_on(gather::fetch_http(&mut facts, timeout));
        sources.add_host(&mut facts);
        gather::read_kv_dirs(&mut facts, &sources.proc_root);
    }
    let mut report = diagnose(&facts);
    report.findings.extend(unread_instances(&facts, &report));
    report.findings.sort_by_key(|f| f.severity);
    Ok(report)
}

/// An instance of which nothing could be read (no answer, no log, no
/// process on this host): nothing about it is clean, so it is a problem,
/// with the reasons as evidence. (The dashboard's doctor reads no HTTP, its
/// scrapers do, so this is the command's own rule.)
fn unread_instances(facts: &crate::doctor::PairFacts, report: &Report) -> Vec<crate::doctor::Finding> {
    use crate::doctor::{Finding, Severity};
    facts
        .instances
        .iter()
        .filter(|i| {
            i.log.is_none()
                && i.metrics.is_none()
                && i.version.is_none()
                && i.models.is_none()
                && i.process.is_none()
        })
        .map(|i| {
            let mut f = Finding::new(
                "instance_unread",
                Severity::Problem,
                i.name(),
                "nothing could be read about this instance, so nothing about it can be called clean",
            );
            let sources: Vec<&str> = report
                .unread
                .iter()
                .filter(|u| u.source.contains(&i.endpoint) || u.why.contains(&i.endpoint))
                .map(|u| u.source.as_str())
                .collect();
            f.evidence = vec![format!("not read (why: under `not read`): {}", sources.join(", "))];
            let role = i.role.name();
            f.fix = format!(
                "start it or check --{role} {}; give --{role}-log for its start-up lines",
                i.endpoint
            );
            f
        })
        .collect()
}

/// An instance known only by its log: the file's name (`-` is stdin).
fn log_name(path: &str) -> String {
    let name =
        std::path::Path::new(path).file_name().map_or(path.to_string(), |n| n.to_string_lossy().into_owned());
    format!("log:{name}")
}
