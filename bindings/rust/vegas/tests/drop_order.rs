//! Objects dropped in any order: no crash, no leak. Its own test binary, so that no other
//! test allocates in the process while the RSS is measured.
mod common;

use vegas::{Request, SessionOptions};

fn cycle(order: usize) {
    let model = common::load();
    let mut session = model
        .session(&SessionOptions {
            kv_bytes: 8 << 20,
            ..SessionOptions::default()
        })
        .unwrap();
    let ids = model.tokenizer().unwrap().encode("x = ").unwrap();
    let seq = session.submit(&Request::new(&ids).max_tokens(4)).unwrap();
    let mut stream = None;
    let own = vegas::Tokenizer::load(common::model_dir()).unwrap();
    {
        let mut det = own.detokenizer(false).unwrap();
        det.push(ids[0]).unwrap();
        session.step().unwrap();
        match order {
            0 => {
                drop(model);
                drop(det);
                session.run().unwrap();
            }
            1 => {
                drop(det);
                let s = session.stream(&Request::new(&ids).max_tokens(4)).unwrap();
                stream = Some(s.seq());
                drop(s); // dropped mid-sequence
                drop(model);
            }
            _ => {
                // A forgotten stream: its queue is freed with the session, not before.
                std::mem::forget(session.stream(&Request::new(&ids).max_tokens(4)).unwrap());
                session.step().unwrap();
                drop(det);
                drop(model);
            }
        }
    }
    let _ = (seq, stream);
    drop(own);
    drop(session);
}

#[test]
fn drop_in_any_order_does_not_crash_or_leak() {
    for order in 0..3 {
        cycle(order);
    }
    for order in 0..3 {
        cycle(order);
    }
    let before = common::rss_bytes();
    for i in 0..30 {
        cycle(i % 3);
    }
    let grown = common::rss_bytes() as i64 - before as i64;
    assert!(
        grown < 16 << 20,
        "RSS grew {} MiB over 30 load/drop cycles",
        grown >> 20
    );
}
