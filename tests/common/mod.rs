//! Helpers shared by the integration tests: where the reference models are and their counts.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `../shared/models` next to the checkout (read-only reference models with published counts).
pub fn shared_models() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models");
    if p.join("REFERENCE.tsv").is_file() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found", p.display());
        None
    }
}

/// One row of REFERENCE.tsv.
#[derive(Clone, Debug)]
pub struct Reference {
    pub path: PathBuf,
    pub rel: String,
    pub states: u64,
    pub transitions: u64,
}

/// Rows for P/T nets (`mcc/`) and explicit LTSs (`vlts/`) with `min < states <= max`.
pub fn reference_rows(min: u64, max: u64) -> Vec<Reference> {
    let Some(dir) = shared_models() else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join("REFERENCE.tsv")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if !(f[0].starts_with("mcc/") || f[0].starts_with("vlts/")) {
            continue;
        }
        let (Ok(states), Ok(transitions)) = (f[3].parse::<u64>(), f[4].parse::<u64>()) else {
            continue;
        };
        if states > min && states <= max {
            rows.push(Reference {
                path: dir.join(f[0]),
                rel: f[0].to_string(),
                states,
                transitions,
            });
        }
    }
    rows.sort_by_key(|r| r.states);
    rows
}

/// The path of the built `spillway` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_spillway")
}

/// A model shipped in the repository's `models/` directory.
pub fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
}
