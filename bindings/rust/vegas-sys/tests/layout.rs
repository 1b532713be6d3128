//! The struct sizes tests/abi/struct_layout.c pins for x86-64 (LP64), and the version.
use std::mem::size_of;
use vegas_sys::*;

#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn struct_sizes_match_the_c_header() {
    assert_eq!(size_of::<vegas_tokenize_options>(), 12);
    assert_eq!(size_of::<vegas_special_tokens>(), 44);
    assert_eq!(size_of::<vegas_model_options>(), 32);
    assert_eq!(size_of::<vegas_model_info>(), 128);
    assert_eq!(size_of::<vegas_session_options>(), 128);
    assert_eq!(size_of::<vegas_sampling_options>(), 48);
    assert_eq!(size_of::<vegas_request>(), 96);
    assert_eq!(size_of::<vegas_token_logprobs>(), 176);
    assert_eq!(size_of::<vegas_sequence_info>(), 88);
    assert_eq!(size_of::<vegas_select_input>(), 48);
    assert_eq!(size_of::<vegas_select_policy>(), 40);
    assert_eq!(size_of::<vegas_session_stats>(), 592);
    assert_eq!(size_of::<vegas_switch_info>(), 40);
    assert_eq!(size_of::<vegas_generate_options>(), 40);
}

#[test]
fn header_and_library_versions_agree() {
    assert_eq!(unsafe { vegas_version_number() }, VEGAS_VERSION_NUMBER);
}

#[test]
fn every_exported_function_is_declared() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let listed = std::fs::read_to_string(root.join("tests/abi/exported_symbols.txt")).unwrap();
    let source = include_str!("../src/lib.rs");
    let mut exported: Vec<&str> = listed.lines().filter(|l| l.starts_with("vegas_")).collect();
    let mut declared: Vec<&str> = source
        .split("pub fn ")
        .skip(1)
        .map(|rest| &rest[..rest.find('(').unwrap()])
        .collect();
    exported.sort_unstable();
    declared.sort_unstable();
    assert_eq!(exported, declared);
}
