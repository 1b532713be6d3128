//! Errors surface as vegas::Error with the library's status and message; sessions outlive
//! model values, cancel handles outlive sessions, a model is shared by threads.
mod common;

use std::thread;

use vegas::{Mode, Model, Request, SessionOptions, Status};

#[test]
fn missing_model_dir_is_an_io_error_naming_it() {
    let err = Model::load_with("/nonexistent/model", &common::cpu()).unwrap_err();
    assert_eq!(err.status(), Status::Io);
    assert!(err.message().contains("/nonexistent/model"), "{}", err);
    assert!(err.to_string().starts_with("VEGAS_ERR_IO: "));
    let _: &dyn std::error::Error = &err;
}

#[test]
fn bad_arguments_carry_the_library_message() {
    let model = common::load();
    let tok = model.tokenizer().unwrap();
    let err = tok.decode(&[1_000_000], false).unwrap_err();
    assert_eq!(err.status(), Status::TokenOutOfRange);
    assert!(!err.message().is_empty());
    let opts = SessionOptions {
        mode: Mode::Vegas,
        policy: Some("no-such-policy".into()),
        ..SessionOptions::default()
    };
    let err = model.session(&opts).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported);
    assert!(err.message().contains("no-such-policy"), "{}", err);
    assert_eq!(
        tok.token_id("<|not a token|>").unwrap_err().status(),
        Status::NotFound
    );
    let mut session = model.session(&SessionOptions::default()).unwrap();
    let err = session.submit(&Request::new(&[])).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(!err.message().is_empty());
    // Refused before reaching the library.
    assert_eq!(
        tok.token_id("a\0b").unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn progress_closure_can_cancel_the_load() {
    let err = Model::load_with_progress(common::model_dir(), &common::cpu(), |_| true).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
}

#[test]
fn session_outlives_the_model_value_and_moves_across_threads() {
    let mut session = {
        let model = common::load();
        model
            .session(&SessionOptions {
                kv_bytes: 8 << 20,
                ..SessionOptions::default()
            })
            .unwrap()
    }; // the last Model value is gone; the session holds its own
    let done = thread::spawn(move || {
        let c = session
            .generate(
                &Request::new(&[331, 290]).max_tokens(4).ignore_eos(true),
                |_| false,
            )
            .unwrap();
        drop(session);
        c
    })
    .join()
    .unwrap();
    assert_eq!(done.tokens.len(), 4);
}

#[test]
fn cancel_handle_after_the_session_is_dropped() {
    let model = common::load();
    let session = model.session(&SessionOptions::default()).unwrap();
    let handle = session.cancel_handle();
    handle.cancel(-1).unwrap();
    drop(session);
    assert_eq!(handle.cancel(-1).unwrap_err().status(), Status::WrongState);
}

#[test]
fn one_model_shared_by_threads() {
    let model = common::load();
    let ids = model.tokenizer().unwrap().encode("def f():").unwrap();
    let outputs: Vec<Vec<i32>> = (0..3)
        .map(|_| {
            let (model, ids) = (model.clone(), ids.clone());
            thread::spawn(move || {
                let mut s = model
                    .session(&SessionOptions {
                        kv_bytes: 8 << 20,
                        ..SessionOptions::default()
                    })
                    .unwrap();
                s.generate(&Request::new(&ids).max_tokens(6).ignore_eos(true), |_| {
                    false
                })
                .unwrap()
                .tokens
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert!(outputs.iter().all(|o| o == &outputs[0]));
}
