//! A capture folder plays like a recording: `check --replay DIR` gives the
//! report `import-lab` + `check --replay FILE` gives, through the real
//! binary.

mod common;

use std::process::Command;

fn check(arg: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--replay", arg, "--json"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_capture_folder_replays_as_its_imported_recording() {
    for name in common::CAPTURES {
        let dir = common::capture_dir(name);
        let file =
            std::env::temp_dir().join(format!("pdtop-replay-capture-{name}-{}.rec", std::process::id()));
        let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
            .args(["import-lab", &dir.display().to_string(), "-o", &file.display().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let from_file = check(&file.display().to_string());
        let from_dir = check(&dir.display().to_string());
        assert_eq!(from_file, from_dir, "{name}");
        assert!(from_dir["requests"]["seen"].as_u64().unwrap() > 50, "{name}: {from_dir}");
        std::fs::remove_file(&file).ok();
    }
}
