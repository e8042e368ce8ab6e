//! Every exit status the README's table lists, from the real binary, and
//! each subcommand's `--help` (which lists the ones it uses).

use std::process::{Command, Output, Stdio};

use crate::common;

fn pdtop(args: &[&str]) -> Output {
    // stdin and stdout are pipes: never a terminal.
    // No COLUMNS: help wraps at clap's width for a pipe, the same everywhere.
    Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(args)
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A file of a folder of its own, the folder gone when it is dropped: a
/// test run leaves nothing in the temp folder.
struct Tmp(std::path::PathBuf);

impl std::ops::Deref for Tmp {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn tmp(name: &str) -> Tmp {
    let dir = std::env::temp_dir().join(format!("pdtop-exit-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Tmp(dir.join(name))
}

#[test]
fn exit_0_a_check_that_finds_nothing_wrong() {
    // The qwen3 capture's logs up to its first miss: warm-up, baseline and
    // disaggregated requests that loaded their KV.
    let d = common::capture_dir("qwen3-shape-restart");
    let mut args = vec!["check".to_string(), "--from-logs".into()];
    let mut files = Vec::new();
    for (flag, name) in [("--prefill-log", "vllm-prefill.log"), ("--decode-log", "vllm-decode.log")] {
        let log = std::fs::read_to_string(d.join(name)).unwrap();
        let head: String =
            log.lines().take_while(|l| !l.contains("lab-edge_block")).map(|l| format!("{l}\n")).collect();
        let path = tmp(name);
        std::fs::write(&*path, head).unwrap();
        args.extend([flag.to_string(), path.display().to_string()]);
        files.push(path);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap();
    assert_eq!(code(&out), 0, "{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict: ok"));
    assert_eq!(code(&pdtop(&["check", "--help"])), 0);
}

#[test]
fn exit_1_a_check_that_finds_misses() {
    let d = common::capture_dir("demo-proxy-qwen3");
    let out = pdtop(&["check", "--replay", &d.display().to_string()]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict: silent_misses"));
}

#[test]
fn exit_2_bad_usage() {
    let missing = tmp("no-such.pdrec").display().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["check", "--bogus"], "--bogus"),
        (&["check", "--prefill", "127.0.0.1:99999", "--duration", "1"], "99999"),
        (&["check", "--decode", "127.0.0.1:0", "--duration", "1"], "not 1 to 65535"),
        (&["--router", "http://r:70000", "--decode", "127.0.0.1:8200"], "70000"),
        (&["demo", "--speed", "0"], "above 0"),
        (&["demo", "--speed=-2"], "above 0"),
        (&["demo", "--speed", "inf"], "above 0"),
        (&["replay", "--speed", "0", "x.pdrec"], "above 0"),
        // An unreadable recording, on screen or not.
        (&["check", "--replay", &missing], "no-such.pdrec"),
        (&["replay", &missing], "no-such.pdrec"),
        (&["kv", "--model-config", &missing, "--tokens", "8"], "no-such.pdrec"),
        // A log a bounded check was given that does not exist: named.
        (
            &["check", "--decode", "127.0.0.1:8200", "--decode-log", &missing, "--duration", "1"],
            "no-such.pdrec",
        ),
    ];
    for (args, says) in cases {
        let out = pdtop(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn exit_3_runtime_failures() {
    // A file that opens but is no recording.
    let bad = tmp("damaged.pdrec");
    std::fs::write(&*bad, b"not a recording\n").unwrap();
    let out = pdtop(&["check", "--replay", &bad.display().to_string()]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("at byte"), "{}", stderr(&out));
    // The screen modes with no terminal.
    let d = common::capture_dir("demo-proxy-qwen3").display().to_string();
    for args in [&["replay", d.as_str()][..], &["--decode", "127.0.0.1:9"][..]] {
        let out = pdtop(args);
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("needs a terminal"), "{}", stderr(&out));
    }
}

#[test]
fn help_of_each_subcommand() {
    for sub in ["", "demo", "check", "kv", "record", "replay", "import-lab", "doctor"] {
        let args: Vec<&str> = [sub, "--help"].into_iter().filter(|a| !a.is_empty()).collect();
        let out = pdtop(&args);
        assert_eq!(code(&out), 0, "{sub}");
        let help = String::from_utf8(out.stdout).unwrap();
        // Every code a subcommand can exit with is in its help.
        let codes: &[&str] = if sub == "check" {
            &["0", "1", "2", "3"]
        } else if sub == "doctor" {
            &["0", "1", "2", "4"]
        } else if sub == "kv" {
            &["0", "2"]
        } else {
            &["0", "2", "3"]
        };
        for c in codes {
            assert!(help.contains(&format!("\n  {c}  ")), "{sub} --help lacks exit {c}:\n{help}");
        }
        // A default is said once (clap's, not the doc comment's too).
        for line in help.lines() {
            assert!(line.matches("[default:").count() <= 1, "{sub}: {line}");
        }
        let name = if sub.is_empty() { "pdtop".to_string() } else { sub.replace('-', "_") };
        insta::assert_snapshot!(format!("help_{name}"), help);
    }
}
