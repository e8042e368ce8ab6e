use std::process::ExitCode;

use clap::Parser;
use pdtop::cli::{Cli, Command};
use pdtop::run;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let usage = |e: String| {
        eprintln!("pdtop: {e}");
        ExitCode::from(2)
    };
    match cli.command {
        Some(Command::Kv(args)) => match pdtop::kv::run(&args, &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => usage(e.to_string()),
        },
        Some(Command::Check(args)) => match run::check(&args) {
            Ok(report) => {
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
                } else {
                    print!("{}", run::summary(&report));
                }
                ExitCode::from(report.verdict.exit_code() as u8)
            }
            Err(e) => usage(e),
        },
        Some(Command::Screenshots(args)) => match run::screenshots(&args.out) {
            Ok(files) => {
                for f in files {
                    println!("{}", f.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => finish(Err(e)),
        },
        Some(Command::Record(args)) => match run::record(&args) {
            Ok(summary) => {
                eprintln!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => usage(e),
        },
        Some(Command::ImportLab(args)) => match run::import_lab(&args) {
            Ok(summary) => {
                eprintln!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => usage(e),
        },
        Some(Command::Replay(args)) => finish(color_eyre::install().and_then(|_| run::replay(args))),
        Some(Command::Demo(args)) => finish(color_eyre::install().and_then(|_| run::demo(args))),
        None => {
            if let Err(e) = run::endpoints(&cli.inputs) {
                return usage(e);
            }
            finish(color_eyre::install().and_then(|_| run::dashboard(cli.inputs, cli.ui)))
        }
    }
}

fn finish(r: color_eyre::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pdtop: {e:#}");
            ExitCode::FAILURE
        }
    }
}
