//! A recording whose recorder was killed (SIGKILL, no chance to finish its
//! zstd stream) still replays: every whole entry up to the last flush
//! (each second), then where it broke.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use pdtop::lab::{self, LabOptions};
use pdtop::record::Recording;

const SPEED: f64 = 5.0;

#[tokio::test]
async fn a_recording_killed_mid_run_replays_up_to_its_last_second() {
    let _turn = common::real_time_turn().await;
    let name = "qwen3-shape-restart";
    let cap = common::capture(name).clone();
    let dir = std::env::temp_dir().join(format!("pdtop-cut-{}", std::process::id()));
    let lab = lab::start(cap, LabOptions { speed: SPEED, looping: false, dir: dir.clone(), otlp_to: None })
        .await
        .unwrap();
    let file = dir.join("cut.pdrec");
    let mut args = vec!["record".to_string(), "-o".into(), file.display().to_string()];
    args.extend(common::lab_pair_args(&lab, SPEED, 60.0));
    args.extend(["--decode-log".into(), lab.decode_log.display().to_string()]);
    let mut rec = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    rec.kill().unwrap(); // SIGKILL
    let ran = began.elapsed().as_secs_f64();
    rec.wait().unwrap();
    let size = std::fs::metadata(&file).unwrap().len();

    let r = Recording::open(&file).expect("the header and every flushed entry read");
    let broken = r.broken.as_ref().expect("a stream killed mid-write ends cut short");
    assert!(broken.error.file_offset <= size, "{broken}");
    // Flushed every second: what was recorded up to a second or two before the kill is there.
    let first = r.messages.first().map(|m| m.at()).unwrap();
    let last = r.messages.last().map(|m| m.at()).unwrap();
    // Entries are stamped on the lab's clock (`--clock-speed`): wall seconds are those over SPEED.
    let span = (last - first) / SPEED;
    assert!(span >= ran - 2.5 && span <= ran + 0.5, "entries span {span:.1} s of a {ran:.1} s run");

    // Played by `check --replay`: a report, with the damage said, not exit 3.
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--replay"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "exit {:?}: {stderr}", out.status.code());
    assert!(
        stderr.contains("recording damaged") && stderr.contains("every whole entry before it"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["requests"]["seen"].as_u64().unwrap() > 0, "{}", report["requests"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_no_recording_is_named_so() {
    let dir = std::env::temp_dir().join(format!("pdtop-notrec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "INFO 12-06 04:08:36 a log, not a recording\n").unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_pdtop")).args(["check", "--replay"]).arg(&text).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a pdtop recording") && stderr.contains("it is text"), "{stderr}");
    assert!(!stderr.contains("Unknown frame descriptor"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
