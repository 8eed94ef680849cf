//! Mutation fuzzing of the readers: PNML, `.aut`, `.slts` and `.fsm`.
//!
//! Real inputs (the shipped Philosophers net and VLTS `vasy_0_1.aut`, and an `.slts` and an
//! `.fsm` produced here by the binary) are mutated by proptest from a fixed seed — bit flips,
//! byte changes, insertions of random bytes or of tokens that matter to the formats (huge
//! numbers, quotes, separators, XML constructs, NUL, bytes that are not UTF-8), deletions,
//! duplicated chunks, truncations — and each mutant goes through the library entry points the
//! commands use (`explore`'s model reading and a bounded exploration, `lts info`, `lts
//! convert`), with the exit code computed exactly as `main` does. Every mutant must end in an
//! exit class the README gives for its kind of input (0 when the mutant happens to be valid,
//! 3 for a malformed model or text LTS, 5 for corrupted or truncated data, 6 for a resource
//! limit), with the file named in the message; never a panic. A tenth of the mutants also run
//! through the binary, which must give the same exit code, end by itself (no signal, no
//! exit 101) and stay within a peak RSS bounded by the input's size.

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use spillway::error::{ExploreError, ModelError};
use spillway::model::petri::{self, TokenWidth};
use spillway::model::{Model, Source};
use spillway::post::convert::{convert, LabelOptions, SizeLimit};
use spillway::post::info::info;
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

/// States explored in-process before a PNML mutant counts as "large" (its binary run, a full
/// exploration, is then skipped: a marking mutated from 1 to 111 can legitimately explode).
const STATE_CAP: usize = 5_000;

/// Tokens worth inserting: they hit the formats' numbers, separators and escapes.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"9",
    b"-1",
    b"4294967295",
    b"4294967296",
    b"34359738368",
    b"9223372036854775807",
    b"18446744073709551615",
    b"99999999999999999999999",
    b"\"",
    b",",
    b"(",
    b")",
    b" ",
    b"\n",
    b"\r\n",
    b"---\n",
    b"[1 1/2 2 1/2]",
    b"des (0, 1, 34359738368)\n",
    b"\0",
    b"\xff",
    b"\xc3",
    b"<",
    b">",
    b"/>",
    b"</place>",
    b"<initialMarking><text>3</text></initialMarking>",
    b"<inscription><text>2</text></inscription>",
    b"<text></text>",
    b"<text>1</text>",
    b"&#0;",
    b"&#1;",
    b"&amp;",
    b"<![CDATA[7]]>",
    b"<toolspecific tool=\"x\">",
    b"</toolspecific>",
    b"<type value=\"inhibitor\"/>",
    b" id=\"t1\"",
    b"<arc id=\"a\" source=\"p\" target=\"t\"/>",
    b"<!--",
    b"-->",
];

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(prop::sample::Index, u8),
    SetByte(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Token(prop::sample::Index, usize, usize),
    /// A token within the first 64 bytes, where the headers are (`des (…)`, the XML prologue
    /// and `<net>`, the native header, the `.fsm` parameter section).
    HeadToken(usize, usize, usize),
    Delete(prop::sample::Index, usize),
    Duplicate(prop::sample::Index, usize, prop::sample::Index),
    Truncate(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        4 => (any::<Index>(), 0usize..6, 0..TOKENS.len())
            .prop_map(|(i, len, t)| Mutation::Token(i, len, t)),
        2 => (0usize..64, 0usize..6, 0..TOKENS.len())
            .prop_map(|(at, len, t)| Mutation::HeadToken(at, len, t)),
        2 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), 1usize..256, any::<Index>())
            .prop_map(|(i, n, j)| Mutation::Duplicate(i, n, j)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(seed: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for m in mutations {
        // Positions are drawn relative to the current length (one past the end included).
        let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
        match m {
            Mutation::FlipBit(i, bit) if !b.is_empty() => {
                let k = i.index(b.len());
                b[k] ^= 1 << bit;
            }
            Mutation::SetByte(i, v) if !b.is_empty() => {
                let k = i.index(b.len());
                b[k] = *v;
            }
            Mutation::Insert(i, v) => {
                let k = at(i, b.len());
                b.splice(k..k, v.iter().copied());
            }
            Mutation::Token(i, len, t) => {
                let k = at(i, b.len());
                let end = (k + len).min(b.len());
                b.splice(k..end, TOKENS[*t].iter().copied());
            }
            Mutation::HeadToken(k, len, t) => {
                let k = (*k).min(b.len());
                let end = (k + len).min(b.len());
                b.splice(k..end, TOKENS[*t].iter().copied());
            }
            Mutation::Delete(i, n) => {
                let k = at(i, b.len());
                let end = (k + n).min(b.len());
                b.drain(k..end);
            }
            Mutation::Duplicate(i, n, j) => {
                let k = at(i, b.len());
                let chunk: Vec<u8> = b[k..(k + n).min(b.len())].to_vec();
                let to = at(j, b.len());
                b.splice(to..to, chunk);
            }
            Mutation::Truncate(i) => {
                let k = at(i, b.len());
                b.truncate(k);
            }
            _ => {}
        }
    }
    b
}

/// The kinds of input and what may become of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pnml,
    Aut,
    Slts,
    Fsm,
}

impl Kind {
    fn ext(self) -> &'static str {
        match self {
            Kind::Pnml => "pnml",
            Kind::Aut => "aut",
            Kind::Slts => "slts",
            Kind::Fsm => "fsm",
        }
    }

    /// Exit codes the README allows for a mutant of this kind: 0 (still valid), 3 (malformed
    /// model or text LTS), 5 (corrupted or truncated data), 6 (a resource limit: a token
    /// counter beyond 32 bits).
    fn allowed(self) -> &'static [i32] {
        match self {
            Kind::Pnml => &[0, 3, 6],
            // The lts tools report a cut-short .aut (fewer transitions than announced) as
            // truncated (5).
            Kind::Aut => &[0, 3, 5],
            Kind::Slts => &[0, 5],
            Kind::Fsm => &[0, 3],
        }
    }
}

/// Explores at most `cap` states breadth-first; `Ok(true)` when the whole state space was seen.
fn bounded_explore(model: &dyn Model, cap: usize) -> Result<bool, ModelError> {
    let mut init = Vec::new();
    model.initial_state(&mut init)?;
    let mut seen = HashSet::new();
    seen.insert(init.clone());
    let mut queue = VecDeque::from([init]);
    let mut next = Vec::new();
    while let Some(s) = queue.pop_front() {
        next.clear();
        model.successors(&s, &mut |_, l, d| {
            assert!(
                (l.0 as usize) < model.label_count(),
                "label {} undefined",
                l.0
            );
            next.push(d.to_vec());
        })?;
        for d in next.drain(..) {
            if seen.insert(d.clone()) {
                if seen.len() > cap {
                    return Ok(false);
                }
                queue.push_back(d);
            }
        }
    }
    Ok(true)
}

/// `spillway explore PATH` in-process: the model is read as `explore_file` reads it, P/T nets
/// are compiled with the counter widths its driver tries (widening on overflow), and at most
/// `STATE_CAP` states are explored. Returns the exit code `main` would give (0 for a model
/// that explores) and whether the exploration was complete, with the error message.
fn explore_in_process(path: &Path) -> (i32, bool, String) {
    let fail = |e: ModelError| {
        let e = ExploreError::from(e);
        (e.exit_code(), true, e.to_string())
    };
    match Source::read(path) {
        Err(e) => fail(e),
        Ok(Source::Aut(m)) => match bounded_explore(&m, usize::MAX) {
            Ok(complete) => (0, complete, String::new()),
            Err(e) => fail(e),
        },
        Ok(Source::Dve(m)) => match bounded_explore(m.as_ref(), STATE_CAP) {
            Ok(complete) => (0, complete, String::new()),
            Err(e) => fail(e),
        },
        Ok(Source::Pnml(net)) => {
            let mut bits = petri::initial_bits(&net, TokenWidth::Auto);
            loop {
                let result = petri::build(net.clone(), bits)
                    .and_then(|m| bounded_explore(m.as_ref(), STATE_CAP));
                match result {
                    Ok(complete) => return (0, complete, String::new()),
                    Err(ModelError::TokenOverflow { .. }) if TokenWidth::wider(bits).is_some() => {
                        bits = TokenWidth::wider(bits).unwrap();
                    }
                    Err(e) => return fail(e),
                }
            }
        }
    }
}

struct Fuzzer {
    dir: tempfile::TempDir,
    kind: Kind,
    seed: Vec<u8>,
    binary_runs: std::cell::Cell<u32>,
    max_rss: std::cell::Cell<u64>,
    /// How often each (command, exit code) came up, to show what the run covered.
    seen: std::cell::RefCell<std::collections::BTreeMap<(&'static str, i32), u32>>,
}

impl Fuzzer {
    fn new(kind: Kind, seed: Vec<u8>) -> Self {
        Fuzzer {
            dir: tempfile::tempdir().unwrap(),
            kind,
            seed,
            binary_runs: Default::default(),
            max_rss: Default::default(),
            seen: Default::default(),
        }
    }

    fn input(&self) -> PathBuf {
        self.dir.path().join(format!("mutant.{}", self.kind.ext()))
    }

    fn output(&self) -> PathBuf {
        // Text inputs become native files; native inputs become .aut text.
        let ext = if self.kind == Kind::Slts {
            "aut"
        } else {
            "slts"
        };
        self.dir.path().join(format!("out.{ext}"))
    }

    /// Checks an exit code and its message for `what` on this mutant.
    fn check(&self, what: &'static str, code: i32, message: &str) -> Result<(), TestCaseError> {
        self.check_in(what, self.kind.allowed(), code, message)
    }

    fn check_in(
        &self,
        what: &'static str,
        allowed: &[i32],
        code: i32,
        message: &str,
    ) -> Result<(), TestCaseError> {
        *self.seen.borrow_mut().entry((what, code)).or_default() += 1;
        prop_assert!(
            allowed.contains(&code),
            "{what} on a {:?} mutant: exit code {code} is not one the README allows: {message}",
            self.kind
        );
        if code != 0 {
            prop_assert!(
                message.contains("mutant."),
                "{what}: the error does not name the file: {message}"
            );
        }
        Ok(())
    }

    fn run(&self, mutations: &[Mutation], binary: bool) -> Result<(), TestCaseError> {
        let bytes = apply(&self.seed, mutations);
        let input = self.input();
        let output = self.output();
        std::fs::write(&input, &bytes).unwrap();
        let _ = std::fs::remove_file(&output);

        // explore, for models.
        let mut explore = None;
        if matches!(self.kind, Kind::Pnml | Kind::Aut) {
            let (code, complete, msg) = explore_in_process(&input);
            // explore reports a malformed or cut-short .aut as a malformed model (3), never
            // as corrupted data.
            self.check_in("explore", &[0, 3, 6], code, &msg)?;
            explore = Some((code, complete));
        }
        // lts info and lts convert, for LTS files.
        let mut lts = None;
        if self.kind != Kind::Pnml {
            let (info_code, info_msg, counts) = match info(&input) {
                Ok(i) => (
                    0,
                    String::new(),
                    Some((i.states, i.transitions, i.deadlocks)),
                ),
                Err(e) => (e.exit_code(), e.to_string(), None),
            };
            self.check("lts info", info_code, &info_msg)?;
            let opts = LabelOptions::default();
            let (conv_code, conv_msg) = match convert(&input, &output, &opts, SizeLimit::Enforce) {
                Ok(r) => {
                    // What was written reads back with the same counts.
                    let back = info(&output).map_err(|e| {
                        TestCaseError::fail(format!("the converted file does not read back: {e}"))
                    })?;
                    prop_assert_eq!(
                        Some((back.states, back.transitions, back.deadlocks)),
                        counts,
                        "convert and info disagree"
                    );
                    prop_assert_eq!(r.summary.transitions, back.transitions);
                    (0, String::new())
                }
                Err(e) => (e.exit_code(), e.to_string()),
            };
            self.check("lts convert", conv_code, &conv_msg)?;
            // Both read the whole file: they accept or refuse it alike.
            prop_assert_eq!(
                info_code,
                conv_code,
                "info: {}; convert: {}",
                info_msg,
                conv_msg
            );
            if conv_code != 0 {
                prop_assert!(!output.exists(), "a failed convert left its output");
            }
            lts = Some(info_code);
        }
        if !binary {
            return Ok(());
        }

        // The binary: same exit code, ends by itself, bounded memory.
        let mut runs: Vec<(Vec<String>, i32)> = Vec::new();
        let path = input.to_str().unwrap().to_string();
        if let Some((code, complete)) = explore {
            // A model whose state space went past the cap is not explored in full here.
            if complete || code != 0 {
                runs.push((vec!["explore".into(), path.clone(), "--quiet".into()], code));
            }
        }
        if let Some(code) = lts {
            runs.push((vec!["lts".into(), "info".into(), path.clone()], code));
            let out = output.to_str().unwrap().to_string();
            runs.push((
                vec![
                    "lts".into(),
                    "convert".into(),
                    "-q".into(),
                    path.clone(),
                    out,
                ],
                code,
            ));
        }
        // 48 MiB and 64 bytes per input byte, on top of what the child inherits from this
        // process (see `common::run_measured`: the figure starts at the parent's RSS).
        let bound = (48 << 20) + 64 * bytes.len() as u64 + common::own_rss();
        for (args, expected) in runs {
            let _ = std::fs::remove_file(&output);
            let m = common::run_measured(Command::new(common::bin()).args(&args));
            self.binary_runs.set(self.binary_runs.get() + 1);
            self.max_rss.set(self.max_rss.get().max(m.max_rss));
            prop_assert!(
                m.signal.is_none(),
                "{args:?}: killed by signal {:?}",
                m.signal
            );
            prop_assert_ne!(m.code, Some(101), "{:?} panicked: {}", args, m.stderr());
            prop_assert_eq!(
                m.code,
                Some(expected),
                "{:?}: the binary and the library disagree: {}",
                args,
                m.stderr()
            );
            prop_assert!(
                m.max_rss <= bound,
                "{args:?}: peak RSS {} KiB above {} KiB for a {}-byte input",
                m.max_rss >> 10,
                bound >> 10,
                bytes.len()
            );
            if expected != 0 {
                let err = m.stderr();
                prop_assert!(err.starts_with("spillway: error: "), "{args:?}: {err}");
            }
        }
        Ok(())
    }
}

/// Runs `cases` mutants of `seed` from a fixed RNG seed; reports the exit codes seen.
fn fuzz(kind: Kind, seed: Vec<u8>, cases: u32) {
    // SPILLWAY_FUZZ_SCALE=N runs N times as many mutants (a longer hunt than the default
    // suite's).
    let scale: u32 = std::env::var("SPILLWAY_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let cases = cases * scale.max(1);
    let fuzzer = Fuzzer::new(kind, seed);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 500,
        ..Config::default()
    };
    // A fixed seed per kind: the same mutants on every run (set SPILLWAY_FUZZ_SEED to explore
    // others).
    let base: u8 = std::env::var("SPILLWAY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rng_seed = [base.wrapping_add(kind as u8 * 17 + 1); 32];
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &rng_seed));
    let strategy = (prop::collection::vec(mutation(), 1..=4), 0u8..10);
    let t0 = std::time::Instant::now();
    let result = runner.run(&strategy, |(mutations, pick)| {
        fuzzer.run(&mutations, pick == 0)
    });
    if let Err(e) = result {
        panic!("{kind:?}: {e}");
    }
    eprintln!(
        "{kind:?}: {cases} mutants in {:.1} s, {} binary runs, largest child peak RSS {} KiB; (command, exit code) counts: {:?}",
        t0.elapsed().as_secs_f64(),
        fuzzer.binary_runs.get(),
        fuzzer.max_rss.get() >> 10,
        fuzzer.seen.borrow()
    );
}

fn shipped(name: &str) -> Vec<u8> {
    std::fs::read(common::shipped(name)).unwrap()
}

/// A file written by the binary from a shipped model (`explore` for .slts, `lts convert`
/// for .fsm).
fn produced(args: &[&str], out_name: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(out_name);
    let mut cmd = Command::new(common::bin());
    cmd.args(args).arg(&out);
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(out).unwrap()
}

#[test]
fn fuzz_pnml_reader() {
    fuzz(Kind::Pnml, shipped("Philosophers-PT-000005.pnml"), 2000);
}

#[test]
fn fuzz_aut_reader() {
    fuzz(Kind::Aut, shipped("vasy_0_1.aut"), 2000);
}

#[test]
fn fuzz_slts_reader() {
    let model = common::shipped("vasy_0_1.aut");
    let slts = produced(
        &["explore", model.to_str().unwrap(), "--quiet", "-o"],
        "v.slts",
    );
    fuzz(Kind::Slts, slts, 1000);
}

#[test]
fn fuzz_fsm_reader() {
    let model = common::shipped("vasy_0_1.aut");
    let fsm = produced(&["lts", "convert", "-q", model.to_str().unwrap()], "v.fsm");
    fuzz(Kind::Fsm, fsm, 1000);
}
