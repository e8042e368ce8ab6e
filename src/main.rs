use std::process::ExitCode;

use clap::Parser;
use pdtop::cli::{Cli, Command};
use pdtop::error::Error;
use pdtop::modes;

/// Exit status: 0 fine, 1 a verdict that fails (`check`), 2 bad usage,
/// 3 a runtime failure (README, "Exit status").
fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Kv(args)) => pdtop::kv::run(&args, &mut std::io::stdout()).map_err(Error::usage),
        Some(Command::Check(args)) => match modes::check(&args) {
            Ok(report) => {
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
                } else {
                    print!("{}", modes::summary(&report));
                }
                return ExitCode::from(report.verdict.exit_code() as u8);
            }
            Err(e) => Err(e),
        },
        Some(Command::Doctor(args)) => match modes::doctor(&args) {
            Ok(report) => {
                if args.json {
                    let mut v = serde_json::to_value(&report).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("verdict".into(), serde_json::json!(report.verdict()));
                    }
                    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
                } else {
                    print!("{}", pdtop::doctor::render::text(&report));
                }
                return ExitCode::from(report.exit_code());
            }
            Err(e) => Err(e),
        },
        Some(Command::Screenshots(args)) => modes::screenshots(&args.out).map(|files| {
            for f in files {
                println!("{}", f.display());
            }
        }),
        Some(Command::Record(args)) => modes::record(&args).map(|s| eprintln!("{s}")),
        Some(Command::ImportLab(args)) => modes::import_lab(&args).map(|s| eprintln!("{s}")),
        Some(Command::Replay(args)) => screen_hooks().and_then(|_| modes::replay(args)),
        Some(Command::Demo(args)) => screen_hooks().and_then(|_| modes::demo(args)),
        None => screen_hooks().and_then(|_| modes::dashboard(cli.inputs, cli.ui)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pdtop: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The screen modes print a panic as a readable report (`panic_report`),
/// which the terminal guard lets through once the screen is restored.
fn screen_hooks() -> Result<(), Error> {
    pdtop::panic_report::install();
    Ok(())
}
