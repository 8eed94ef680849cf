//! Tells the tests whether the reference models (`../shared/models`, or the directory named
//! by `SPILLWAY_SHARED_MODELS`) are beside the checkout: the tests that need them are marked
//! `#[cfg_attr(not(shared_models), ignore = "...")]`, so that without them `cargo test`
//! reports them as ignored, by name and count, instead of passing on nothing. With `CI` set
//! their absence fails the build: CI must never skip them silently.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shared_models)");
    println!("cargo::rerun-if-env-changed=SPILLWAY_SHARED_MODELS");
    println!("cargo::rerun-if-env-changed=CI");
    let dir = std::env::var_os("SPILLWAY_SHARED_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/models"));
    let reference = dir.join("REFERENCE.tsv");
    println!("cargo::rerun-if-changed={}", reference.display());
    if reference.is_file() {
        println!("cargo::rustc-cfg=shared_models");
    } else if std::env::var_os("CI").is_some() {
        panic!(
            "{} not found and CI is set: the reference tests need the shared models beside the checkout",
            reference.display()
        );
    } else {
        println!(
            "cargo::warning={} not found: the tests that need the reference models are ignored (cargo test lists them)",
            reference.display()
        );
    }
}
