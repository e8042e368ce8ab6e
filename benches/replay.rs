//! Headless replay of a one-hour recording (target: under 5 s), and one
//! frame of the overview at 200x60 (target: under 2 ms) and at 160x48,
//! and frames that move, through ratatui's terminal and pdtop's screen.
//!
//! The hour is the embedded recording (146 s of a real vLLM pair: scrapes,
//! three logs, interface counters, the connector directory) imported 25
//! times back to back, written as a real recording file; the replay reads
//! the file and folds every entry through `AppState::apply`, which is what
//! `pdtop check --replay` and `pdtop replay` do.
//!
//! `cargo bench --bench replay`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use pdtop::app::App;
use pdtop::feed::Msg;
use pdtop::lab::{Capture, replay};
use pdtop::pipeline::{Player, Session};
use pdtop::record::{Recording, Writer};
use pdtop::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// One hour of recording: the capture looped with shifted times.
fn hour_recording(capture: &Capture) -> Vec<u8> {
    let once = replay::messages(capture, capture.t_end - capture.t0 + 1.0, true);
    let span = capture.t_end - capture.t0 + 2.0;
    let loops = (3600.0 / span).ceil() as usize;
    let mut session = Session::from_capture(capture, true);
    session.kv_model.get_or_insert(pdtop::state::link::KvModel {
        bytes_per_token: 147_456,
        source: "bench".into(),
        layers: None,
    });
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, &session).expect("writer");
    for l in 0..loops {
        let shift = l as f64 * span;
        for m in once.iter().filter(|m| m.is_observation()) {
            let mut m = m.clone();
            *m.at_mut() += shift;
            w.write(&m).expect("write");
        }
    }
    drop(w);
    out
}

fn bench(c: &mut Criterion) {
    let capture = Capture::embedded().expect("embedded capture");
    let bytes = hour_recording(&capture);
    let rec = Recording::read(&bytes[..]).expect("read");
    let span =
        rec.messages.last().map(Msg::at).unwrap_or(0.0) - rec.messages.first().map(Msg::at).unwrap_or(0.0);
    println!("recording: {:.0} s, {} entries, {} bytes compressed", span, rec.messages.len(), bytes.len());

    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("one_hour_headless", |b| {
        b.iter(|| {
            let rec = Recording::read(&bytes[..]).expect("read");
            let mut state = rec.session.state();
            let end = Player::new(rec, state.clone(), 1.0, String::new()).run_to_end(&mut state);
            state.finish(end);
            black_box(pdtop::report::Report::from_state(&state))
        })
    });
    g.finish();

    // A frame of the overview, 60 s into the recording: misses, traces,
    // histograms, the token chart.
    let mut app = App::new(replay::state_at(&capture, 60.0, true), Theme::builtin("dark").expect("theme"));
    app.on_msg(Msg::Tick { at: capture.t0 + 60.0 });
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("backend");
    let mut g = c.benchmark_group("frame");
    g.bench_function("overview_200x60", |b| b.iter(|| term.draw(|f| app.draw(f)).map(|_| ()).expect("draw")));
    // The size the idle-CPU measurement watches at (scripts/measure-live-paired.sh).
    let mut term = Terminal::new(TestBackend::new(160, 48)).expect("backend");
    g.bench_function("overview_160x48", |b| b.iter(|| term.draw(|f| app.draw(f)).map(|_| ()).expect("draw")));
    // As the dashboard draws: a second apart, so the charts move, and the
    // escapes written (to a sink). ratatui's terminal and crossterm's
    // backend, as pdtop drew until 2026-12-07, against its own screen.
    let mut next = App::new(replay::state_at(&capture, 61.0, true), Theme::builtin("dark").expect("theme"));
    next.on_msg(Msg::Tick { at: capture.t0 + 61.0 });
    let apps = [&app, &next];
    let viewport = ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, 160, 48));
    let mut term = Terminal::with_options(
        ratatui::backend::CrosstermBackend::new(std::io::sink()),
        ratatui::TerminalOptions { viewport },
    )
    .expect("backend");
    let mut k = 0;
    g.bench_function("moving_160x48_crossterm", |b| {
        b.iter(|| {
            k += 1;
            term.draw(|f| apps[k % 2].draw(f)).map(|_| ()).expect("draw")
        })
    });
    let mut screen = pdtop::ui::Screen::new(std::io::sink(), 160, 48);
    g.bench_function("moving_160x48_screen", |b| {
        b.iter(|| {
            k += 1;
            screen.draw(|buf| apps[k % 2].paint(buf)).expect("draw")
        })
    });
    // An hour in: the charts' hour of history, the ring of requests full
    // (2026-12-07: 626 µs against 236 µs at a minute, before the charts
    // folded blocks and the overview stopped sorting every request).
    let rec = Recording::read(&bytes[..]).expect("read");
    let mut state = rec.session.state();
    Player::new(rec, state.clone(), 1.0, String::new()).run_to_end(&mut state);
    let late = App::new(state, Theme::builtin("dark").expect("theme"));
    let mut screen = pdtop::ui::Screen::new(std::io::sink(), 160, 48);
    g.bench_function("an_hour_in_160x48_screen", |b| {
        b.iter(|| screen.draw(|buf| late.paint(buf)).expect("draw"))
    });
    let paint = |app: &App| {
        let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, 160, 48));
        app.paint(&mut buf);
        buf
    };
    let (a, b) = (paint(&app), paint(&next));
    let mut out = Vec::new();
    pdtop::ui::write_changes(&a, &b, &mut out);
    println!("a moving frame writes {} bytes", out.len());
    g.bench_function("diff_160x48", |bench| {
        bench.iter(|| {
            out.clear();
            pdtop::ui::write_changes(&a, &b, &mut out);
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
