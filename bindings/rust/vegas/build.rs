//! This crate's tests and examples find libvegas at run time without LD_LIBRARY_PATH:
//! they get an rpath to the folder vegas-sys linked against (DEP_VEGAS_LIB_DIR). The
//! rpath does not reach crates that depend on this one.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_VEGAS_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_VEGAS_LIB_DIR") {
        if cfg!(unix) && !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
