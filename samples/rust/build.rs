//! Lets the sample find libvegas at run time: an rpath to $VEGAS_LIB_DIR, the folder it
//! was linked against (vegas-sys reads the same variable).
fn main() {
    println!("cargo:rerun-if-env-changed=VEGAS_LIB_DIR");
    if let Ok(dir) = std::env::var("VEGAS_LIB_DIR") {
        if cfg!(unix) && !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
