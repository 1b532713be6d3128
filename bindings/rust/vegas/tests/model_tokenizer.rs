//! Loading the embedded model, its info, and the tokenizer round trip.
mod common;

use vegas::{Backend, Tokenizer};

#[test]
fn library_version_matches_the_crate() {
    assert_eq!(vegas::version(), env!("CARGO_PKG_VERSION"));
    assert_eq!(vegas::version_number(), vegas_sys::VEGAS_VERSION_NUMBER);
}

#[test]
fn embedded_model_info() {
    let model = common::load();
    let info = model.info().unwrap();
    assert_eq!(info.backend, Backend::Cpu);
    assert_eq!(info.architecture, "Qwen3ForCausalLM");
    assert_eq!(info.vocab_size, model.tokenizer().unwrap().vocab_size());
    assert!(info.n_layers > 0 && info.kv_bytes_per_token > 0);
}

#[test]
fn tokenize_detokenize_round_trip() {
    let model = common::load();
    let tok = model.tokenizer().unwrap();
    for text in [
        "def f(x):\n    return x * 2\n",
        "naïve = '日本語' # ünïcödé ✓",
        "<|fim_prefix|>a = 1",
    ] {
        let ids = tok.encode(text).unwrap();
        assert!(!ids.is_empty() && ids.iter().all(|&i| i >= 0 && i < tok.vocab_size()));
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
        // The streaming detokenizer gives the same text, never half a character.
        let mut det = tok.detokenizer(false).unwrap();
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(&det.push(id).unwrap());
        }
        streamed.push_str(&det.flush().unwrap());
        assert_eq!(streamed, text);
    }
    let bytes: Vec<u8> = tok
        .encode("print(1)")
        .unwrap()
        .iter()
        .flat_map(|&i| tok.piece(i).unwrap())
        .collect();
    assert_eq!(bytes, b"print(1)");
}

#[test]
fn special_tokens() {
    let model = common::load();
    let tok = model.tokenizer().unwrap();
    let special = tok.special_tokens().unwrap();
    assert_eq!(special.fim_prefix, tok.token_id("<|fim_prefix|>").unwrap());
    assert!(tok.is_special(special.fim_prefix));
    assert_eq!(
        tok.encode("<|fim_prefix|>").unwrap(),
        vec![special.fim_prefix]
    );
    assert_ne!(
        tok.encode_with("<|fim_prefix|>", false, true).unwrap(),
        vec![special.fim_prefix]
    );
}

#[test]
fn standalone_tokenizer_agrees_with_the_models() {
    let model = common::load();
    let own = Tokenizer::load(common::model_dir().join("tokenizer.json")).unwrap();
    let text = "for i in range(10):\n    print(i)\n";
    assert_eq!(
        own.encode(text).unwrap(),
        model.tokenizer().unwrap().encode(text).unwrap()
    );
}
