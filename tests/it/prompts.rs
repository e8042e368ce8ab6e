//! Prompt text that vLLM prints is shown only with `--show-prompts`.

use crate::common;

use pdtop::app::App;
use pdtop::feed::LogOrigin;
use pdtop::feed::Msg;
use pdtop::feed::{TailCounts, TailState};
use pdtop::state::AppState;
use pdtop::theme::Theme;
use pdtop::ui::View;

const PROMPT: &str = "the launch code is 0000";

fn screen(show: bool) -> String {
    let logs =
        vec![(LogOrigin::Prefill(0), "p.log".to_string()), (LogOrigin::Decode(0), "d.log".to_string())];
    let mut st = AppState::new(common::pair_endpoints(), 60.0).with_logs(&logs).show_prompts(show);
    let line = |role: &str, max: u32| {
        format!(
            "({role} pid=1) INFO 11-30 06:25:31 [logger.py:43] Received request cmpl-lab-p-0: prompt: '{PROMPT}', params: SamplingParams(n=1, max_tokens={max}, extra_args=None), prompt_token_ids: [1, 2], lora_request: None."
        )
    };
    let batch = |source, lines: Vec<String>, at| Msg::LogLines {
        source,
        at,
        lines,
        state: TailState::Following,
        counts: TailCounts::default(),
    };
    st.apply(batch(LogOrigin::Prefill(0), vec![line("APIServer", 1)], 1_796_019_931.0));
    st.apply(batch(LogOrigin::Decode(0), vec![line("APIServer", 64)], 1_796_019_931.5));
    st.apply(Msg::LogsPolled { at: 1_796_019_931.5 });
    let mut app = App::new(st, Theme::builtin("dark").unwrap());
    app.view.view = View::Requests;
    app.view.detail = true;
    common::screen_text(&app, 160, 40)
}

#[test]
fn prompts_are_hidden_unless_asked_for() {
    let hidden = screen(false);
    assert!(hidden.contains("trace lab-p"), "{hidden}");
    assert!(!hidden.contains(PROMPT), "{hidden}");
    let shown = screen(true);
    assert!(shown.contains(PROMPT), "{shown}");
}
