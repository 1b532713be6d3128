//! Finds libvegas: $VEGAS_LIB_DIR (a folder holding libvegas.so, e.g. a CMake build's
//! `lib/`), else `pkg-config vegas` (the installed vegas.pc), else the linker's default
//! search path. The folder is passed on to dependents as DEP_VEGAS_LIB_DIR.
use std::env;
use std::process::Command;

fn pkg_config_lib_dirs() -> Option<Vec<String>> {
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "vegas"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(
        text.split_whitespace()
            .filter_map(|f| f.strip_prefix("-L"))
            .map(String::from)
            .collect(),
    )
}

fn main() {
    println!("cargo:rerun-if-env-changed=VEGAS_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dirs = match env::var("VEGAS_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => vec![dir],
        _ => pkg_config_lib_dirs().unwrap_or_default(),
    };
    for dir in &dirs {
        println!("cargo:rustc-link-search=native={}", dir);
    }
    if let Some(dir) = dirs.first() {
        println!("cargo:lib_dir={}", dir);
        if cfg!(unix) {
            // Only this crate's own tests get the rpath (link args never reach dependents).
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    if dirs.is_empty() {
        println!(
            "cargo:warning=libvegas: neither VEGAS_LIB_DIR nor `pkg-config vegas` named its folder; \
             relying on the linker's default search path"
        );
    }
    println!("cargo:rustc-link-lib=dylib=vegas");
}
