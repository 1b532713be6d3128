//! Shared by the integration tests: the embedded model and the C CLI.
#![allow(dead_code)]
use std::path::PathBuf;
use std::process::Command;

use vegas::{Backend, Model, ModelOptions};

/// $VEGAS_MODEL_DIR, else the repository's models/vegas-code-22m.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("VEGAS_MODEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../models/vegas-code-22m"),
    }
}

pub fn cpu() -> ModelOptions {
    ModelOptions {
        backend: Backend::Cpu,
        ..ModelOptions::default()
    }
}

pub fn load() -> Model {
    Model::load_with(model_dir(), &cpu()).expect("the embedded model loads")
}

/// The "tokens" and "text" of `vegas generate --json` (the C CLI named by $VEGAS_CLI), or
/// None when the variable is unset (ctest always sets it).
pub fn cli_generate(args: &[&str]) -> Option<(Vec<i32>, String)> {
    let cli = std::env::var_os("VEGAS_CLI")?;
    let out = Command::new(cli)
        .args(["generate", "--backend", "cpu", "--json"])
        .args(args)
        .output()
        .expect("the CLI runs");
    assert!(
        out.status.success(),
        "CLI failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).expect("UTF-8 JSON");
    Some((json_int_array(&json, "tokens"), json_string(&json, "text")))
}

/// The integer array of a top-level key (a tiny reader: std has no JSON).
fn json_int_array(json: &str, key: &str) -> Vec<i32> {
    let start = json.find(&format!("\"{}\":[", key)).expect("key present") + key.len() + 4;
    let end = start + json[start..].find(']').expect("array end");
    json[start..end]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("an integer"))
        .collect()
}

/// The string value of a top-level key, with JSON escapes decoded.
fn json_string(json: &str, key: &str) -> String {
    let start = json.find(&format!("\"{}\":\"", key)).expect("key present") + key.len() + 4;
    let mut out = String::new();
    let mut chars = json[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return out,
            '\\' => match chars.next().expect("escape") {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = (0..4).map(|_| chars.next().expect("hex")).collect();
                    let unit = u32::from_str_radix(&hex, 16).expect("hex digits");
                    out.push(char::from_u32(unit).unwrap_or('\u{fffd}'));
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    panic!("unterminated string");
}

/// Resident set size of this process, from /proc.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
