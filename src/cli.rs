//! Command line. Options that a config file may also set are `Option`s here
//! so that `config::Settings::resolve` can apply CLI > file > default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::kv::KvArgs;

#[derive(Debug, Parser)]
#[command(
    name = "pdtop",
    version,
    // Wrapped to the terminal, never wider than this.
    max_term_width = 100,
    about = "A terminal dashboard for a vLLM disaggregated-prefill pair: TTFT/TPOT of both sides, KV usage, \
             where decode's prompt tokens came from, and the silent miss (decode recomputed the prompt and nothing errored).",
    after_help = concat!(
        "Try `pdtop demo` for a recorded lab, no GPU needed.\n\n",
        exit_status!(screen "no instance found through --prometheus")
    )
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub ui: UiArgs,
}

// Parsed once per run: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The dashboard against an embedded lab: a real vLLM pair's recording
    /// served on loopback (127.0.0.1 only).
    #[command(after_help = exit_status!(screen "a lab that did not start"))]
    Demo(DemoArgs),
    /// No screen: watch for a while, print a verdict and exit by it (0 ok,
    /// 1 silent misses or degraded).
    #[command(after_help = exit_status!(check))]
    Check(Box<CheckArgs>),
    /// KV-cache bytes per token and per prompt from a model's config.json.
    #[command(after_help = exit_status!(usage_only))]
    Kv(KvArgs),
    /// Record everything pdtop sees (same inputs as the dashboard) to one
    /// compressed file; stops after --duration or on Ctrl-C.
    #[command(after_help = exit_status!(file))]
    Record(Box<RecordArgs>),
    /// The dashboard on a recording, or on log files after the fact
    /// (`--from-logs`): p pauses, ←/→ seek 10 s, +/- speed.
    #[command(after_help = exit_status!(screen "a damaged recording"))]
    Replay(ReplayArgs),
    /// Turn a capture in the lab-captures layout into a recording.
    #[command(after_help = exit_status!(file))]
    ImportLab(ImportLabArgs),
    /// Before the first request: read the pair's start-up logs, endpoints,
    /// processes and this host's network, and name each misconfiguration
    /// with its cause, evidence and fix.
    #[command(after_help = exit_status!(doctor))]
    // The dashboard's flags it shares but does not read stay out of its help.
    #[command(mut_arg("router", |a| a.hide(true)))]
    #[command(mut_arg("proxy_log", |a| a.hide(true)))]
    #[command(mut_arg("kv_dir", |a| a.hide(true)))]
    #[command(mut_arg("iface", |a| a.hide(true)))]
    #[command(mut_arg("net_dev_file", |a| a.hide(true)))]
    #[command(mut_arg("sys_class_infiniband", |a| a.hide(true)))]
    #[command(mut_arg("model_config", |a| a.hide(true)))]
    #[command(mut_arg("kv_bytes_per_token", |a| a.hide(true)))]
    #[command(mut_arg("kv_cache_dtype", |a| a.hide(true)))]
    #[command(mut_arg("show_prompts", |a| a.hide(true)))]
    #[command(mut_arg("interval", |a| a.hide(true)))]
    #[command(mut_arg("window", |a| a.hide(true)))]
    #[command(mut_arg("stuck_after", |a| a.hide(true)))]
    #[command(mut_arg("prometheus", |a| a.hide(true)))]
    #[command(mut_arg("prefill_match", |a| a.hide(true)))]
    #[command(mut_arg("decode_match", |a| a.hide(true)))]
    #[command(mut_arg("prometheus_user", |a| a.hide(true)))]
    #[command(mut_arg("otlp_listen", |a| a.hide(true)))]
    #[command(mut_arg("otlp_grpc_listen", |a| a.hide(true)))]
    #[command(mut_arg("otlp_allow_remote", |a| a.hide(true)))]
    #[command(mut_arg("clock_speed", |a| a.hide(true)))]
    Doctor(Box<DoctorArgs>),
    /// Writes the README's screenshots (SVG) from the embedded recording.
    #[command(hide = true)]
    Screenshots(ScreenshotArgs),
}

/// The `Exit status` paragraph of a subcommand's `--help`: the README's
/// table, in the words of that subcommand (`src/error.rs` holds the codes).
macro_rules! exit_status {
    (@usage) => {
        "  2  bad usage: flags that do not fit, a value out of range (a port, a speed), a file\n     \
         given that cannot be read\n"
    };
    (@runtime $what:literal) => {
        concat!("  3  a runtime failure: ", $what, "\n")
    };
    (screen $what:literal) => {
        concat!(
            "Exit status:\n  0  quit by the user (q, Ctrl-C, a signal)\n",
            exit_status!(@usage),
            exit_status!(@runtime "no terminal (stdout is not one) or one that cannot be set up,"),
            "     ",
            $what,
            "\n"
        )
    };
    (check) => {
        concat!(
            "Exit status:\n  0  verdict ok or no_data\n  1  verdict silent_misses or degraded\n",
            exit_status!(@usage),
            exit_status!(@runtime "a damaged recording, no instance found through --prometheus")
        )
    };
    (file) => {
        concat!(
            "Exit status:\n  0  written\n",
            exit_status!(@usage),
            exit_status!(@runtime "the recording cannot be written, a source that cannot start")
        )
    };
    (usage_only) => {
        concat!("Exit status:\n  0  printed\n", exit_status!(@usage))
    };
    (doctor) => {
        concat!(
            "Exit status:\n  0  clean: every source read, nothing wrong (warnings and notes allowed)\n  1  a problem found (an instance of which\n     \
             nothing could be read is one)\n",
            exit_status!(@usage),
            "  4  nothing wrong in what was read, but some source could not be read: the\n     \
             checks on it did not run (listed under `not read`)\n"
        )
    };
}
use exit_status;

/// `--prefill`, `--decode`, `--router`: HOST:PORT (port 1 to 65535) or an
/// http(s) URL, checked when the flags are parsed so that a typo is bad
/// usage, not an instance that is always DOWN.
fn endpoint(s: &str) -> Result<String, String> {
    crate::feed::Endpoint::parse(crate::feed::Role::Prefill, s).map(|_| s.to_string())
}

/// A look-back: a finite number of seconds, 0 or more.
fn since(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds (0 or more)")),
    }
}

/// A speed: a finite number above 0 (0 would never move, below 0 back).
fn speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err(format!("{s}: a speed is a number above 0")),
        Err(e) => Err(format!("{s}: {e}")),
    }
}

#[derive(Debug, Args)]
pub struct ScreenshotArgs {
    /// Output folder.
    #[arg(long, default_value = "screenshots")]
    pub out: PathBuf,
}

/// What to watch.
#[derive(Debug, Args, Clone, Default)]
pub struct Inputs {
    /// Prefill (kv_producer) instances: HOST:PORT or URL, one or more.
    #[arg(long, num_args = 1.., value_name = "HOST:PORT", value_parser = endpoint)]
    pub prefill: Vec<String>,
    /// Decode (kv_consumer) instances: HOST:PORT or URL, one or more.
    #[arg(long, num_args = 1.., value_name = "HOST:PORT", value_parser = endpoint)]
    pub decode: Vec<String>,
    /// A vllm-router in PD mode: its Prometheus address (`--prometheus-port`,
    /// default 29000), HOST:PORT or URL. Also `router = "..."` in the config file.
    #[arg(long, value_name = "HOST:PORT", value_parser = endpoint)]
    pub router: Option<String>,
    /// The prefill instances' logs, in the order of --prefill (`-` = stdin).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub prefill_log: Vec<String>,
    /// The decode instances' logs, in the order of --decode.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub decode_log: Vec<String>,
    /// The proxy's log (vLLM's disagg_proxy_demo, the NIXL toy proxy,
    /// vllm-router, llm-d's routing sidecar, or pdtop's JSON-lines format;
    /// `-` = stdin).
    #[arg(long, value_name = "FILE")]
    pub proxy_log: Option<String>,
    /// The ExampleConnector's shared_storage_path: new folders are stored
    /// prompts, their bytes the transfer.
    #[arg(long, value_name = "DIR")]
    pub kv_dir: Option<PathBuf>,
    /// The interface the KV should cross (e.g. ib0, eth0). Every interface is
    /// read: pdtop says loudly when another one carried the KV.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    /// Read the interface counters of this process's network namespace
    /// (a containerised vLLM).
    #[arg(long, value_name = "PID")]
    pub netns_pid: Option<u32>,
    /// Read interface counters from this file (in /proc/net/dev format)
    /// instead of /proc.
    #[arg(long, value_name = "FILE", hide = true)]
    pub net_dev_file: Option<PathBuf>,
    /// Read link speeds from this tree instead of /sys/class/net (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    pub sys_class_net: Option<PathBuf>,
    /// Read RDMA devices from this tree instead of /sys/class/infiniband (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    pub sys_class_infiniband: Option<PathBuf>,
    /// The model's config.json, for the KV bytes each token should move
    /// (default: the `root` that /v1/models reports, when it is local).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// KV bytes per token, when no config.json is at hand.
    #[arg(long, value_name = "N", conflicts_with = "model_config")]
    pub kv_bytes_per_token: Option<u64>,
    /// The instances' --kv-cache-dtype (auto, fp8, ...).
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,
    /// Show the prompt text that vLLM prints in its logs (older versions at
    /// INFO, newer at DEBUG) in the trace view. Off by default: logs hold
    /// users' prompts.
    #[arg(long)]
    pub show_prompts: bool,
    /// Seconds between scrapes [default: 1].
    #[arg(long, value_name = "SECS")]
    pub interval: Option<f64>,
    /// Seconds before a scrape is given up [default: 2].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Seconds of the sliding window of the histograms [default: 60].
    #[arg(long, value_name = "SECS")]
    pub window: Option<f64>,
    /// Seconds a decode request may still be seen waiting for its remote KV
    /// (`WAITING_FOR_REMOTE_KVS`) before it is flagged stuck [default: 480,
    /// vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, after which the prefill frees it].
    #[arg(long, value_name = "SECS")]
    pub stuck_after: Option<f64>,
    /// A config file instead of $XDG_CONFIG_HOME/pdtop/config.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Read the instances from this Prometheus server's query API instead of
    /// scraping them (Thanos, Mimir, VictoriaMetrics work too). Bearer token
    /// from PDTOP_PROMETHEUS_TOKEN.
    #[arg(long, value_name = "URL", conflicts_with_all = ["prefill", "decode"])]
    pub prometheus: Option<String>,
    /// With --prometheus: the label matcher of the prefill instances'
    /// series, e.g. '{job="vllm-prefill"}'.
    #[arg(long, value_name = "SELECTOR", requires = "prometheus")]
    pub prefill_match: Option<String>,
    /// With --prometheus: the label matcher of the decode instances' series.
    #[arg(long, value_name = "SELECTOR", requires = "prometheus")]
    pub decode_match: Option<String>,
    /// With --prometheus: basic-auth user; the password is read from
    /// PDTOP_PROMETHEUS_PASSWORD.
    #[arg(long, value_name = "USER", requires = "prometheus")]
    pub prometheus_user: Option<String>,
    /// Receive vLLM's own request spans over OTLP/HTTP (`POST /v1/traces`)
    /// on PORT or IP:PORT (start vLLM with --otlp-traces-endpoint
    /// http://ADDR/v1/traces). Loopback only unless --otlp-allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub otlp_listen: Option<String>,
    /// The same over OTLP/gRPC (`TraceService/Export`, vLLM's default
    /// exporter): --otlp-traces-endpoint http://ADDR.
    #[arg(long, value_name = "ADDR")]
    pub otlp_grpc_listen: Option<String>,
    /// Let the OTLP receiver listen on an address other machines reach
    /// (spans hold request metadata: ids, token counts, timings).
    #[arg(long)]
    pub otlp_allow_remote: bool,
    /// Read this many seconds of the logs' past on start (what they printed
    /// before pdtop started: its misses are named, marked so) [default: 600].
    #[arg(long, value_name = "SECS", value_parser = since)]
    pub since: Option<f64>,
    /// Run pdtop's clock this many times faster than real time, to watch a
    /// lab replayed at that speed (latencies in its histograms are in lab
    /// seconds).
    #[arg(long, value_name = "X", hide = true)]
    pub clock_speed: Option<f64>,
    /// With --clock-speed: the Unix time the lab's clock started (its
    /// stamps run at its speed from then), so that pdtop keeps the lab's
    /// time whenever it starts.
    #[arg(long, value_name = "UNIX_S", hide = true, requires = "clock_speed")]
    pub clock_origin: Option<f64>,
}

#[derive(Debug, Args, Clone, Default)]
pub struct UiArgs {
    /// Theme: dark, light, mono, a name in ~/.config/pdtop/themes, or a path.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Lab seconds per real second.
    #[arg(long, default_value_t = 2.0, value_parser = speed)]
    pub speed: f64,
    /// A capture folder in the lab-captures layout instead of the embedded one.
    #[arg(long, value_name = "DIR")]
    pub capture: Option<PathBuf>,
    /// Play the recording once instead of looping.
    #[arg(long)]
    pub no_loop: bool,
    /// Serve the lab and print its endpoints, without the dashboard, until Ctrl-C.
    #[arg(long)]
    pub serve_only: bool,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The recording to write.
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
    /// Stop after this many seconds (default: on Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub inputs: Inputs,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording made by `pdtop record` or `pdtop import-lab`, or a
    /// capture folder in the `lab-captures` layout.
    #[arg(required_unless_present = "from_logs")]
    pub file: Option<PathBuf>,
    /// Play the --*-log files instead, from their start, on their own
    /// timestamps (no endpoints, so no metrics: logs only).
    #[arg(long, conflicts_with = "file")]
    pub from_logs: bool,
    /// With --from-logs: the prefill instances' logs.
    #[arg(long, num_args = 1.., value_name = "FILE", requires = "from_logs")]
    pub prefill_log: Vec<String>,
    /// With --from-logs: the decode instances' logs.
    #[arg(long, num_args = 1.., value_name = "FILE", requires = "from_logs")]
    pub decode_log: Vec<String>,
    /// With --from-logs: the proxy's log.
    #[arg(long, value_name = "FILE", requires = "from_logs")]
    pub proxy_log: Option<String>,
    /// Seconds a decode request may wait for remote KV before it is stuck
    /// [default: 480].
    #[arg(long, value_name = "SECS")]
    pub stuck_after: Option<f64>,
    /// Recording seconds per real second.
    #[arg(long, default_value_t = 1.0, value_parser = speed)]
    pub speed: f64,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct ImportLabArgs {
    /// A capture folder (scrapes.jsonl.xz, vllm-*.log, ...).
    pub dir: PathBuf,
    /// The recording to write.
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// How long to watch.
    #[arg(long, value_name = "SECS", required_unless_present_any = ["replay", "from_logs"])]
    pub duration: Option<f64>,
    /// Read a recording (or a capture folder) instead of watching live.
    #[arg(long, value_name = "FILE", conflicts_with = "duration")]
    pub replay: Option<PathBuf>,
    /// Read the --*-log files whole, after the fact, on their own
    /// timestamps (no endpoints needed): the same report as a live check.
    #[arg(long, conflicts_with_all = ["duration", "replay"])]
    pub from_logs: bool,
    /// Print the JSON report (the machine interface) instead of a summary.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub inputs: Inputs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The proxy in front of the pair, HOST:PORT: its command line is read
    /// when it runs on this host.
    #[arg(long, value_name = "HOST:PORT")]
    pub proxy: Option<String>,
    /// Print the findings as JSON (the machine interface).
    #[arg(long)]
    pub json: bool,
    /// Read /proc from this folder instead (tests; a container's /proc).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
    #[command(flatten)]
    pub inputs: Inputs,
}
