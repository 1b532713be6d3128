//! Generation: greedy tokens equal the C CLI's, streaming order, cancellation, options.
mod common;

use std::sync::mpsc;
use std::thread;

use vegas::{
    FinishReason, GenerateOptions, Mode, Request, Sampling, Schedule, SelectInput, SelectPolicy,
    SessionOptions, Status,
};

const PROMPT: &str = "def read_config(path):\n";

fn prompt_ids(model: &vegas::Model, text: &str) -> Vec<i32> {
    model.tokenizer().unwrap().encode(text).unwrap()
}

#[test]
fn greedy_tokens_equal_the_cli() {
    let (ref_tokens, ref_text) =
        common::cli_generate(&["--prompt", PROMPT, "--max-tokens", "24", "--ignore-eos"])
            .expect("VEGAS_CLI is set");
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(24)
        .ignore_eos(true);
    let done = session.generate(&req, |_| false).unwrap();
    assert_eq!(done.tokens, ref_tokens);
    assert_eq!(done.text, ref_text);
    assert_eq!(done.info.finish_reason, FinishReason::Length);
    assert_eq!(done.info.n_generated, 24);
}

#[test]
fn one_call_generate_equals_the_cli_text() {
    let (_, ref_text) = common::cli_generate(&["--prompt", "import os\n", "--max-tokens", "20"])
        .expect("VEGAS_CLI is set");
    let model = common::load();
    let mut streamed = String::new();
    let opts = GenerateOptions {
        max_tokens: Some(20),
        ..GenerateOptions::default()
    };
    let text = model
        .generate("import os\n", &opts, |t| {
            streamed.push_str(&t.text);
            false
        })
        .unwrap();
    assert_eq!(text, ref_text);
    assert_eq!(streamed, text);
}

#[test]
fn streaming_order_matches_the_sequence() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(16)
        .ignore_eos(true);
    let streamed: Vec<vegas::Token> = session.stream(&req).unwrap().map(|t| t.unwrap()).collect();
    let mut seen = Vec::new();
    let done = session
        .generate(&req, |t| {
            seen.push(t.clone());
            false
        })
        .unwrap();
    assert_eq!(
        streamed.iter().map(|t| t.id).collect::<Vec<_>>(),
        done.tokens
    );
    assert_eq!(
        streamed.iter().map(|t| t.text.as_str()).collect::<String>(),
        done.text
    );
    // The closure saw the same ids and pieces (the second sequence has another seq id).
    let pairs = |v: &[vegas::Token]| v.iter().map(|t| (t.id, t.text.clone())).collect::<Vec<_>>();
    assert_eq!(pairs(&seen), pairs(&streamed));
}

#[test]
fn two_streams_of_one_session_in_turn() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let a = session
        .submit(
            &Request::new(&prompt_ids(&model, "class Stack:\n"))
                .max_tokens(8)
                .ignore_eos(true),
        )
        .unwrap();
    // The stream steps the whole session: the other sequence advances too.
    let text = session
        .stream(
            &Request::new(&prompt_ids(&model, PROMPT))
                .max_tokens(12)
                .ignore_eos(true),
        )
        .unwrap()
        .collect_text()
        .unwrap();
    assert!(!text.is_empty());
    assert_eq!(session.info(a).unwrap().finish_reason, FinishReason::Length);
    assert_eq!(session.tokens(a).unwrap().len(), 8);
}

#[test]
fn prefill_first_schedule_gives_the_same_greedy_tokens() {
    let model = common::load();
    let prompts = [PROMPT, "class Stack:\n"];
    let run = |opts: &SessionOptions| {
        let mut session = model.session(opts).unwrap();
        let ids: Vec<i32> = prompts
            .iter()
            .map(|p| {
                let req = Request::new(&prompt_ids(&model, p))
                    .max_tokens(8)
                    .ignore_eos(true);
                session.submit(&req).unwrap()
            })
            .collect();
        session.run().unwrap();
        ids.iter()
            .map(|&id| session.tokens(id).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(SessionOptions::default().schedule, Schedule::Interleave);
    let interleaved = run(&SessionOptions::default());
    let prefill_first = run(&SessionOptions {
        schedule: Schedule::PrefillFirst,
        ..SessionOptions::default()
    });
    assert_eq!(interleaved[0].len(), 8);
    assert_eq!(prefill_first, interleaved);
}

#[test]
fn callback_returning_true_stops_the_sequence() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let mut n = 0;
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(64)
        .ignore_eos(true);
    let done = session
        .generate(&req, |_| {
            n += 1;
            n == 5
        })
        .unwrap();
    assert_eq!(done.info.finish_reason, FinishReason::Callback);
    assert_eq!(done.tokens.len(), 5);
}

#[test]
fn cancel_from_another_thread() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let handle = session.cancel_handle();
    let (first_token, wait) = mpsc::channel::<()>();
    let canceller = thread::spawn(move || {
        wait.recv().unwrap();
        handle.cancel(-1).unwrap();
    });
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(2000)
        .ignore_eos(true);
    let mut first = Some(first_token);
    let done = session
        .generate(&req, |_| {
            if let Some(tx) = first.take() {
                tx.send(()).unwrap();
            }
            false
        })
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(done.info.finish_reason, FinishReason::Cancelled);
    assert!(done.info.n_generated >= 1 && done.info.n_generated < 2000);
}

#[test]
fn dropping_a_stream_early_releases_the_sequence() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(100)
        .ignore_eos(true);
    let seq = {
        let mut stream = session.stream(&req).unwrap();
        stream.next().unwrap().unwrap();
        stream.seq()
    };
    assert_eq!(session.info(seq).unwrap_err().status(), Status::NotFound);
}

#[test]
fn panic_in_a_callback_resumes_in_the_caller() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let req = Request::new(&prompt_ids(&model, PROMPT)).max_tokens(8);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = session.generate(&req, |_| panic!("from the callback"));
    }));
    let message = caught.unwrap_err();
    assert_eq!(message.downcast_ref::<&str>(), Some(&"from the callback"));
    // The session is still usable, and released that sequence.
    assert_eq!(session.generate(&req, |_| false).unwrap().tokens.len(), 8);
}

#[test]
fn sampling_is_reproducible_per_seed() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let ids = prompt_ids(&model, PROMPT);
    let sampled = |seed: u64, s: &mut vegas::Session| {
        let sampling = Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            seed,
            ..Sampling::default()
        };
        s.generate(
            &Request::new(&ids)
                .max_tokens(16)
                .ignore_eos(true)
                .sampling(sampling),
            |_| false,
        )
        .unwrap()
        .tokens
    };
    let a = sampled(7, &mut session);
    assert_eq!(a, sampled(7, &mut session));
    assert_ne!(a, sampled(8, &mut session));
}

#[test]
fn stop_string_ends_the_text() {
    let model = common::load();
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let req = Request::new(&prompt_ids(&model, PROMPT))
        .max_tokens(24)
        .ignore_eos(true);
    let full = session.generate(&req, |_| false).unwrap().text;
    let stop: String = full.trim().chars().take(3).collect();
    let cut = session
        .generate(&req.clone().stop_string(&stop), |_| false)
        .unwrap();
    assert_eq!(cut.info.finish_reason, FinishReason::Stop);
    assert_eq!(cut.text, full[..full.find(&stop).unwrap()]);
}

#[test]
fn vegas_mode_reports_speculative_stats() {
    let model = common::load();
    let opts = SessionOptions {
        mode: Mode::Vegas,
        gamma: 4,
        policy: Some("streaming".into()),
        ..SessionOptions::default()
    };
    let mut session = model.session(&opts).unwrap();
    let done = session
        .generate(
            &Request::new(&prompt_ids(&model, PROMPT))
                .max_tokens(24)
                .ignore_eos(true),
            |_| false,
        )
        .unwrap();
    let stats = session.stats().unwrap();
    assert_eq!(done.tokens.len(), 24);
    assert_eq!(stats.gamma, 4);
    assert!(stats.rounds > 0 && stats.drafted > 0);
    assert!((stats.tokens_per_round - stats.committed as f64 / stats.rounds as f64).abs() < 1e-9);
}

struct TopBudget {
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl SelectPolicy for TopBudget {
    fn select(&mut self, q: &SelectInput<'_>, out: &mut [i32]) -> Result<usize, Status> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut order: Vec<usize> = (0..q.scores.len()).collect();
        order.sort_by(|&a, &b| q.scores[b].partial_cmp(&q.scores[a]).unwrap());
        let mut chosen: Vec<usize> = order.into_iter().take(q.budget.max(0) as usize).collect();
        chosen.sort_unstable();
        for (slot, pos) in out.iter_mut().zip(&chosen) {
            *slot = *pos as i32;
        }
        Ok(chosen.len())
    }
}

#[test]
fn rust_selection_policy_is_called_and_dropped() {
    let model = common::load();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let opts = SessionOptions {
        mode: Mode::Vegas,
        gamma: 4,
        min_tokens: 4,
        ..SessionOptions::default()
    };
    let policy = Box::new(TopBudget {
        calls: calls.clone(),
    });
    let mut session = model.session_with_policy(&opts, policy).unwrap();
    let ids = prompt_ids(&model, &PROMPT.repeat(4));
    let done = session
        .generate(&Request::new(&ids).max_tokens(16).ignore_eos(true), |_| {
            false
        })
        .unwrap();
    assert_eq!(done.tokens.len(), 16);
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) > 0);
    drop(session);
    assert_eq!(
        std::sync::Arc::strong_count(&calls),
        1,
        "the library dropped the policy"
    );
}

#[test]
fn a_policy_without_vegas_mode_is_refused_and_dropped() {
    let model = common::load();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let policy = Box::new(TopBudget {
        calls: calls.clone(),
    });
    let err = model
        .session_with_policy(&SessionOptions::default(), policy)
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("Mode::Vegas"));
    assert_eq!(std::sync::Arc::strong_count(&calls), 1);
    // A failed create (here: a budget too small for any page) drops the policy too.
    let tiny = SessionOptions {
        mode: Mode::Vegas,
        kv_bytes: 1,
        ..SessionOptions::default()
    };
    let result = model.session_with_policy(
        &tiny,
        Box::new(TopBudget {
            calls: calls.clone(),
        }),
    );
    assert!(result.is_err(), "a 1-byte KV budget is refused");
    assert_eq!(std::sync::Arc::strong_count(&calls), 1);
}
