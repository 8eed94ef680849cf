//! Behaviour of the offline post-processing tools (`spillway lts ...`): property tests of
//! reduce and compare against a naive reference, round trips of the VLTS files, and the CLI.

mod common;

use proptest::prelude::*;
use spillway::post::compare::{compare, Equivalence, Explanation, Side, TraceSearch};
use spillway::post::graph::Lts;
use spillway::post::reduce::minimise;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Reference: naive signature refinement to the fixpoint (quadratic, obviously correct).
fn naive_classes(lts: &Lts) -> Vec<u32> {
    let n = lts.states as usize;
    let mut cls = vec![0u32; n];
    let mut count = 1;
    loop {
        let mut ids: HashMap<(u32, Vec<(u32, u32)>), u32> = HashMap::new();
        let mut next = vec![0u32; n];
        for s in 0..n {
            let mut sig: Vec<(u32, u32)> = lts
                .out(s as u32)
                .map(|(l, d)| (l, cls[d as usize]))
                .collect();
            sig.sort_unstable();
            sig.dedup();
            let fresh = ids.len() as u32;
            next[s] = *ids.entry((cls[s], sig)).or_insert(fresh);
        }
        cls = next;
        if ids.len() == count {
            return cls;
        }
        count = ids.len();
    }
}

/// Number of naive classes reachable from the initial state.
fn naive_reachable_classes(lts: &Lts) -> usize {
    let cls = naive_classes(lts);
    let mut seen = vec![false; lts.states as usize];
    let mut stack = vec![lts.initial];
    seen[lts.initial as usize] = true;
    let mut classes = std::collections::HashSet::new();
    while let Some(s) = stack.pop() {
        classes.insert(cls[s as usize]);
        for (_, d) in lts.out(s) {
            if !seen[d as usize] {
                seen[d as usize] = true;
                stack.push(d);
            }
        }
    }
    classes.len()
}

fn labels(k: usize) -> Vec<String> {
    (0..k)
        .map(|i| ["a", "b", "c", "d"][i].to_string())
        .collect()
}

fn edges_of(lts: &Lts) -> Vec<(u32, u32, u32)> {
    (0..lts.states)
        .flat_map(|s| lts.out(s).map(move |(l, d)| (s, l, d)))
        .collect()
}

/// Random LTSs: up to 10 states, 1–3 labels, up to 25 edges (sparse enough for deadlocks,
/// dense enough for nondeterminism).
fn arb_lts() -> impl Strategy<Value = Lts> {
    (1u32..10, 1usize..4).prop_flat_map(|(n, k)| {
        proptest::collection::vec((0..n, 0..k as u32, 0..n), 0..25)
            .prop_map(move |e| Lts::from_edges(n, 0, labels(k), &e).unwrap())
    })
}

/// Checks that a claimed difference is real: a trace is valid in one LTS and not the other;
/// a formula holds in one initial state and not the other.
fn check_witness(a: &Lts, b: &Lts, verdict: &Equivalence) {
    let pick = |s: Side| if s == Side::First { (a, b) } else { (b, a) };
    match verdict {
        Equivalence::Equivalent => {}
        Equivalence::Different {
            search,
            explanation,
        } => {
            if let TraceSearch::Found { trace, possible_in } = search {
                let (yes, no) = pick(*possible_in);
                assert!(
                    yes.accepts(trace),
                    "trace {trace:?} not valid where claimed"
                );
                assert!(
                    !no.accepts(trace),
                    "trace {trace:?} also valid in the other LTS"
                );
            }
            if let Some(Explanation::Formula { formula, holds_in }) = explanation {
                let (yes, no) = pick(*holds_in);
                assert!(
                    formula.holds(yes, yes.initial),
                    "{formula} fails where claimed"
                );
                assert!(
                    !formula.holds(no, no.initial),
                    "{formula} holds in the other LTS"
                );
            }
        }
    }
}

fn naive_bisimilar(a: &Lts, b: &Lts) -> bool {
    let (u, init_b) = spillway::post::compare::disjoint_union(a.clone(), b.clone()).unwrap();
    let cls = naive_classes(&u);
    cls[u.initial as usize] == cls[init_b as usize]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn reduce_matches_naive_reference(a in arb_lts()) {
        let m = minimise(a.clone(), &[a.initial]).unwrap();
        prop_assert_eq!(m.lts.states as usize, naive_reachable_classes(&a));
        prop_assert_eq!(m.lts.initial, 0);
        // The quotient is minimal: all its states are pairwise non-bisimilar.
        let q = naive_classes(&m.lts);
        let distinct: std::collections::HashSet<_> = q.iter().collect();
        prop_assert_eq!(distinct.len(), m.lts.states as usize);
    }

    #[test]
    fn reduce_is_idempotent(a in arb_lts()) {
        let once = minimise(a.clone(), &[a.initial]).unwrap().lts;
        let twice = minimise(once.clone(), &[once.initial]).unwrap().lts;
        prop_assert_eq!(&once, &twice);
    }

    #[test]
    fn compare_with_own_reduction_is_equivalent(a in arb_lts()) {
        let r = minimise(a.clone(), &[a.initial]).unwrap().lts;
        prop_assert_eq!(compare(a, r).unwrap().verdict, Equivalence::Equivalent);
    }

    #[test]
    fn duplicated_states_do_not_change_the_reduced_size(
        a in arb_lts(),
        redirect in proptest::collection::vec(any::<bool>(), 25),
    ) {
        // Add a copy of every state with the same outgoing edges (to originals or, at random,
        // to copies): every copy is bisimilar to its original.
        let n = a.states;
        let mut edges = Vec::new();
        for (i, (s, l, d)) in edges_of(&a).into_iter().enumerate() {
            let d2 = if redirect[i % redirect.len()] { d + n } else { d };
            edges.push((s, l, d2));
            edges.push((s + n, l, if redirect[(i + 1) % redirect.len()] { d + n } else { d }));
        }
        let doubled = Lts::from_edges(2 * n, a.initial, a.labels.clone(), &edges).unwrap();
        let r1 = minimise(a.clone(), &[a.initial]).unwrap().lts;
        let r2 = minimise(doubled.clone(), &[doubled.initial]).unwrap().lts;
        prop_assert_eq!(r1.states, r2.states);
        prop_assert_eq!(r1.transitions(), r2.transitions());
        prop_assert_eq!(compare(a, doubled).unwrap().verdict, Equivalence::Equivalent);
    }

    #[test]
    fn a_single_change_is_detected_with_a_valid_witness(
        a in arb_lts(),
        which in any::<prop::sample::Index>(),
        kind in 0u8..3,
        to in 0u32..10,
    ) {
        let mut edges = edges_of(&a);
        let k = a.labels.len() as u32;
        match kind {
            // Change one edge's label.
            0 if !edges.is_empty() => { let i = which.index(edges.len()); edges[i].1 = (edges[i].1 + 1) % (k + 1); }
            // Change one edge's target.
            1 if !edges.is_empty() => { let i = which.index(edges.len()); edges[i].2 = to % a.states; }
            // Add one edge.
            _ => edges.push((which.index(a.states as usize) as u32, k % (k + 1), to % a.states)),
        }
        let mut labels = a.labels.clone();
        labels.push("z".into());
        let b = Lts::from_edges(a.states, a.initial, labels, &edges).unwrap();
        let verdict = compare(a.clone(), b.clone()).unwrap().verdict;
        prop_assert_eq!(verdict == Equivalence::Equivalent, naive_bisimilar(&a, &b));
        check_witness(&a, &b, &verdict);
        // A difference always comes with a witness: a trace, or else an explanation.
        if let Equivalence::Different { search, explanation } = &verdict {
            let found = matches!(search, TraceSearch::Found { .. });
            prop_assert!(found || explanation.is_some(), "no witness");
        }
    }
}

// ---------------------------------------------------------------- VLTS files and the CLI

fn vlts_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/vlts");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: {} is missing", dir.display());
        None
    }
}

fn vlts_files() -> Vec<PathBuf> {
    let Some(dir) = vlts_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "aut"))
        .collect();
    v.sort();
    v
}

fn spillway(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(args)
        .output()
        .unwrap()
}

fn aut_header(path: &Path) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let first = text.lines().next().unwrap();
    let inner = first
        .trim()
        .trim_start_matches("des")
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')');
    let v: Vec<u64> = inner
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

#[test]
fn vlts_round_trip_and_info_match_headers() {
    let dir = tempfile::tempdir().unwrap();
    for aut in vlts_files() {
        let (initial, transitions, states) = aut_header(&aut);
        let name = aut.file_stem().unwrap().to_str().unwrap();
        let native = dir.path().join(format!("{name}.slts"));
        let back = dir.path().join(format!("{name}.aut"));
        let a = aut.to_str().unwrap();
        assert!(
            spillway(&["lts", "convert", a, native.to_str().unwrap(), "-q"])
                .status
                .success()
        );
        assert!(spillway(&[
            "lts",
            "convert",
            native.to_str().unwrap(),
            back.to_str().unwrap(),
            "-q"
        ])
        .status
        .success());
        for file in [&aut, &native, &back] {
            let out = spillway(&["lts", "info", "--json", file.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(j["states"], states, "{}", file.display());
            assert_eq!(j["transitions"], transitions, "{}", file.display());
            assert_eq!(j["initial"], initial, "{}", file.display());
            let per_label: u64 = j["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["transitions"].as_u64().unwrap())
                .sum();
            assert_eq!(per_label, transitions);
        }
        // Same edges in the same order.
        let orig = Lts::load(&aut).unwrap();
        let again = Lts::load(&back).unwrap();
        assert_eq!(orig, again, "{name}");
        assert_eq!(aut_header(&back), (initial, transitions, states));
    }
}

#[test]
fn vlts_reduce_matches_naive_reference() {
    for aut in vlts_files() {
        let lts = Lts::load(&aut).unwrap();
        let expected = naive_reachable_classes(&lts);
        let m = minimise(lts.clone(), &[lts.initial]).unwrap();
        assert_eq!(m.lts.states as usize, expected, "{}", aut.display());
        assert_eq!(
            compare(lts, m.lts).unwrap().verdict,
            Equivalence::Equivalent
        );
    }
}

#[test]
fn cli_reduce_compare_deadlocks() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.aut");
    let b = dir.path().join("b.aut");
    // a: 0 -x-> 1 -y-> 2, 0 -x-> 3 -y-> 4 (two bisimilar branches); b: 0 -x-> 1 -z-> 2.
    std::fs::write(
        &a,
        "des (0, 4, 5)\n(0, \"x\", 1)\n(1, \"y\", 2)\n(0, \"x\", 3)\n(3, \"y\", 4)\n",
    )
    .unwrap();
    std::fs::write(&b, "des (0, 2, 3)\n(0, \"x\", 1)\n(1, \"z\", 2)\n").unwrap();
    let red = dir.path().join("r.slts");
    let out = spillway(&[
        "lts",
        "reduce",
        a.to_str().unwrap(),
        red.to_str().unwrap(),
        "--strong",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs about"));
    let lts = Lts::load(&red).unwrap();
    assert_eq!((lts.states, lts.transitions(), lts.initial), (3, 2, 0));

    let out = spillway(&[
        "lts",
        "compare",
        a.to_str().unwrap(),
        red.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "equivalent (strong bisimulation)\n"
    );
    let out = spillway(&[
        "lts",
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-q",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("not equivalent"), "{text}");
    assert!(text.contains("distinguishing trace (2 steps)"), "{text}");
    assert_eq!(out.status.code(), Some(1), "not equivalent: exit code 1");

    let out = spillway(&[
        "lts",
        "deadlocks",
        a.to_str().unwrap(),
        "--limit",
        "5",
        "-q",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("deadlocks     2 (2 reachable"), "{text}");
    assert!(
        text.contains("trace to deadlock state 2 (2 steps):\n  x\n  y\n"),
        "{text}"
    );
    let out = spillway(&["lts", "deadlocks", a.to_str().unwrap(), "--json", "-q"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["deadlocks"], 2);
    assert_eq!(j["traces"][0]["trace"], serde_json::json!(["x", "y"]));
}

#[test]
fn cli_convert_formats_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.aut");
    std::fs::write(
        &a,
        "des (1, 3, 3)\n(1, \"send\", 0)\n(0, i, 2)\n(2, \"recv\", 1)\n",
    )
    .unwrap();
    let fsm = dir.path().join("a.fsm");
    let out = spillway(&[
        "lts",
        "convert",
        a.to_str().unwrap(),
        fsm.to_str().unwrap(),
        "--hide",
        "recv",
        "--internal",
        "tau",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One (empty) state line per state, so that the state count survives.
    assert_eq!(
        std::fs::read_to_string(&fsm).unwrap(),
        "---\n\n\n\n---\n2 1 \"send\"\n1 3 \"tau\"\n3 2 \"tau\"\n---\n2\n"
    );
    let dot = dir.path().join("a.dot");
    assert!(
        spillway(&["lts", "convert", a.to_str().unwrap(), dot.to_str().unwrap()])
            .status
            .success()
    );
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .contains("1 -> 0 [label=\"send\"];"));

    // A big LTS is refused as .dot unless forced; nothing is left behind.
    let mut big = String::from("des (0, 20000, 20001)\n");
    for i in 0..20000 {
        big.push_str(&format!("({i}, \"a\", {})\n", i + 1));
    }
    let bigp = dir.path().join("big.aut");
    std::fs::write(&bigp, big).unwrap();
    let bigdot = dir.path().join("big.dot");
    let out = spillway(&[
        "lts",
        "convert",
        bigp.to_str().unwrap(),
        bigdot.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert!(!bigdot.exists());
    assert!(spillway(&[
        "lts",
        "convert",
        bigp.to_str().unwrap(),
        bigdot.to_str().unwrap(),
        "--force"
    ])
    .status
    .success());

    // .dot cannot be read: a usage error naming the file.
    let out = spillway(&["lts", "info", dot.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a.dot"));
}

#[test]
fn cli_bad_input_gives_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.aut");
    std::fs::write(&a, "des (0, 3, 3)\n(0, \"a\", 1)\n(1, \"b\", 2)\n").unwrap();
    let native = dir.path().join("a.slts");
    // Truncated .aut: fewer transitions than announced → corrupt/truncated exit code 5.
    for tool in ["info", "deadlocks"] {
        let out = spillway(&["lts", tool, a.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(5), "{tool}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("a.aut") && err.contains("truncated"), "{err}");
    }
    let out = spillway(&[
        "lts",
        "reduce",
        a.to_str().unwrap(),
        native.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(5));
    assert!(!native.exists());

    // A cut-short native file and a flipped byte in one.
    std::fs::write(&a, "des (0, 2, 3)\n(0, \"a\", 1)\n(1, \"b\", 2)\n").unwrap();
    assert!(spillway(&[
        "lts",
        "convert",
        a.to_str().unwrap(),
        native.to_str().unwrap()
    ])
    .status
    .success());
    let bytes = std::fs::read(&native).unwrap();
    let cut = dir.path().join("cut.slts");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let flipped = dir.path().join("flip.slts");
    let mut f = bytes.clone();
    f[40] ^= 0x55;
    std::fs::write(&flipped, &f).unwrap();
    for bad in [&cut, &flipped] {
        for tool in [
            vec!["lts", "info", bad.to_str().unwrap()],
            vec!["lts", "compare", bad.to_str().unwrap(), a.to_str().unwrap()],
            vec![
                "lts",
                "reduce",
                bad.to_str().unwrap(),
                dir.path().join("o.aut").to_str().unwrap(),
            ],
            vec![
                "lts",
                "convert",
                bad.to_str().unwrap(),
                dir.path().join("o.aut").to_str().unwrap(),
            ],
        ] {
            let out = spillway(&tool);
            assert_eq!(out.status.code(), Some(5), "{tool:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(bad.file_name().unwrap().to_str().unwrap()),
                "{err}"
            );
        }
    }
    // A syntax error names line and column.
    std::fs::write(&a, "des (0, 1, 2)\n(0, \"a\" 1)\n").unwrap();
    let out = spillway(&["lts", "info", a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a.aut:2:"));
    // Missing file: I/O error.
    let out = spillway(&[
        "lts",
        "info",
        dir.path().join("none.slts").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(4));
}

// ---------------------------------------------------------------- branching bisimulation

/// Reference: naive branching-bisimulation signature refinement (Blom–Orzan): the signature of
/// s is {(a, class t) | s -tau->* s' within s's class, s' -a-> t, not (a = tau and t in s's
/// class)}.
fn naive_branching_classes(lts: &Lts) -> Vec<u32> {
    let n = lts.states as usize;
    let is_tau = |l: u32| lts.labels[l as usize] == "tau" || lts.labels[l as usize] == "i";
    let mut cls = vec![0u32; n];
    let mut count = 1;
    loop {
        let mut ids: HashMap<(u32, Vec<(u32, u32)>), u32> = HashMap::new();
        let mut next = vec![0u32; n];
        for s in 0..n {
            let mut sig = Vec::new();
            let mut seen = vec![false; n];
            let mut stack = vec![s as u32];
            seen[s] = true;
            while let Some(x) = stack.pop() {
                for (l, d) in lts.out(x) {
                    let inert = is_tau(l) && cls[d as usize] == cls[s];
                    if inert {
                        if !seen[d as usize] {
                            seen[d as usize] = true;
                            stack.push(d);
                        }
                    } else {
                        sig.push((if is_tau(l) { u32::MAX } else { l }, cls[d as usize]));
                    }
                }
            }
            sig.sort_unstable();
            sig.dedup();
            let fresh = ids.len() as u32;
            next[s] = *ids.entry((cls[s], sig)).or_insert(fresh);
        }
        cls = next;
        if ids.len() == count {
            return cls;
        }
        count = ids.len();
    }
}

fn arb_tau_lts() -> impl Strategy<Value = Lts> {
    (1u32..9, 1usize..3).prop_flat_map(|(n, k)| {
        proptest::collection::vec((0..n, 0..=k as u32, 0..n), 0..20).prop_map(move |e| {
            let mut labels = vec!["tau".to_string()];
            labels.extend(labels_named(k));
            Lts::from_edges(n, 0, labels, &e).unwrap()
        })
    })
}

fn labels_named(k: usize) -> Vec<String> {
    labels(k)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn branching_matches_naive_reference(a in arb_tau_lts()) {
        use spillway::post::branching::minimise_branching;
        let m = minimise_branching(a.clone(), &[a.initial]).unwrap();
        // Classes reachable from the initial state, per the reference.
        let cls = naive_branching_classes(&a);
        let mut seen = vec![false; a.states as usize];
        let mut stack = vec![a.initial];
        seen[a.initial as usize] = true;
        let mut classes = std::collections::HashSet::new();
        while let Some(s) = stack.pop() {
            classes.insert(cls[s as usize]);
            for (_, d) in a.out(s) {
                if !seen[d as usize] { seen[d as usize] = true; stack.push(d); }
            }
        }
        prop_assert_eq!(m.lts.states as usize, classes.len());
        // Idempotent, and the quotient is branching bisimilar to the input.
        let again = minimise_branching(m.lts.clone(), &[0]).unwrap().lts;
        prop_assert_eq!(&again, &m.lts);
        let (u, init_b) = spillway::post::compare::disjoint_union(a.clone(), m.lts.clone()).unwrap();
        let c = naive_branching_classes(&u);
        prop_assert_eq!(c[u.initial as usize], c[init_b as usize]);
    }
}

#[test]
fn vlts_branching_matches_naive_reference() {
    use spillway::post::branching::minimise_branching;
    for aut in vlts_files() {
        let lts = Lts::load(&aut).unwrap();
        if lts.states > 10_000 {
            continue; // the naive reference is quadratic
        }
        let cls = naive_branching_classes(&lts);
        let distinct: std::collections::HashSet<_> = cls.iter().collect();
        let m = minimise_branching(lts.clone(), &[lts.initial]).unwrap();
        // Every VLTS state is reachable (REFERENCE.tsv), so all classes are kept.
        assert_eq!(m.classes as usize, distinct.len(), "{}", aut.display());
        assert_eq!(m.lts.states as usize, distinct.len(), "{}", aut.display());
    }
}

#[test]
fn cli_branching_reduce_and_weak_trace() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.aut");
    let b = dir.path().join("b.aut");
    // a: tau.x.y ; b: x.tau.z
    std::fs::write(
        &a,
        "des (0, 3, 4)\n(0, \"tau\", 1)\n(1, \"x\", 2)\n(2, \"y\", 3)\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "des (0, 3, 4)\n(0, \"x\", 1)\n(1, i, 2)\n(2, \"z\", 3)\n",
    )
    .unwrap();
    let red = dir.path().join("r.aut");
    let out = spillway(&[
        "lts",
        "reduce",
        "--branching",
        a.to_str().unwrap(),
        red.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lts = Lts::load(&red).unwrap();
    assert_eq!((lts.states, lts.transitions()), (3, 2));
    let out = spillway(&[
        "lts",
        "compare",
        "--branching",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-q",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("not equivalent (branching bisimulation)"),
        "{text}"
    );
    assert!(
        text.contains("distinguishing weak trace (2 steps)"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "not equivalent: exit code 1");
    let out = spillway(&[
        "lts",
        "compare",
        "--branching",
        a.to_str().unwrap(),
        red.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "equivalent (branching bisimulation)\n"
    );
    let out = spillway(&[
        "lts",
        "reduce",
        "--strong",
        "--branching",
        a.to_str().unwrap(),
        red.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// Whether `trace` is a weak trace of `lts` (internal steps `tau`/`i` may occur anywhere).
fn weakly_accepts(lts: &Lts, trace: &[String]) -> bool {
    let is_tau = |l: u32| lts.labels[l as usize] == "tau" || lts.labels[l as usize] == "i";
    let close = |set: &mut Vec<u32>| {
        let mut i = 0;
        while i < set.len() {
            let s = set[i];
            i += 1;
            for (l, d) in lts.out(s) {
                if is_tau(l) && !set.contains(&d) {
                    set.push(d);
                }
            }
        }
    };
    let mut cur = vec![lts.initial];
    close(&mut cur);
    for name in trace {
        let mut next = Vec::new();
        for &s in &cur {
            for (l, d) in lts.out(s) {
                if &lts.labels[l as usize] == name && !next.contains(&d) {
                    next.push(d);
                }
            }
        }
        close(&mut next);
        if next.is_empty() {
            return false;
        }
        cur = next;
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn branching_compare_agrees_with_reference_and_weak_traces_are_valid(
        a in arb_tau_lts(),
        which in any::<prop::sample::Index>(),
        to in 0u32..9,
    ) {
        use spillway::post::compare::compare_with;
        use spillway::post::Bisimulation;
        let mut edges = edges_of(&a);
        if edges.is_empty() {
            edges.push((0, 0, to % a.states));
        } else {
            let i = which.index(edges.len());
            edges[i].2 = to % a.states;
        }
        let b = Lts::from_edges(a.states, a.initial, a.labels.clone(), &edges).unwrap();
        let verdict = compare_with(a.clone(), b.clone(), Bisimulation::Branching).unwrap().verdict;
        let (u, init_b) = spillway::post::compare::disjoint_union(a.clone(), b.clone()).unwrap();
        let c = naive_branching_classes(&u);
        prop_assert_eq!(verdict == Equivalence::Equivalent, c[u.initial as usize] == c[init_b as usize]);
        if let Equivalence::Different { search: TraceSearch::Found { trace, possible_in }, .. } = &verdict {
            let (yes, no) = if *possible_in == Side::First { (&a, &b) } else { (&b, &a) };
            prop_assert!(weakly_accepts(yes, trace));
            prop_assert!(!weakly_accepts(no, trace));
        }
    }
}

// ---------------------------------------------------------------- output = input

/// `tool` run in `dir` with `args`; the input `x.aut` must survive every way of naming it as
/// the output: the same relative path, `./x.aut`, a symbolic link and a hard link to it.
fn assert_refuses_own_input(tool: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/vasy_0_1.aut");
    let input = dir.path().join("x.aut");
    std::fs::copy(&model, &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    std::os::unix::fs::symlink("x.aut", dir.path().join("sym.aut")).unwrap();
    std::fs::hard_link(&input, dir.path().join("hard.aut")).unwrap();
    // The symbolic link to the partial file: the tool would write the input through it.
    std::os::unix::fs::symlink("x.aut", dir.path().join("p.aut.partial")).unwrap();
    for output in ["x.aut", "./x.aut", "sym.aut", "hard.aut", "p.aut"] {
        let out = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .current_dir(dir.path())
            .args(tool)
            .args(["x.aut", output])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool:?} {output}: {err}");
        assert!(
            err.contains(output) && err.contains("x.aut") && err.contains("same file"),
            "{tool:?} {output}: {err}"
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            original,
            "{tool:?} {output}"
        );
        assert!(!dir.path().join(format!("{output}.partial")).exists() || output == "p.aut");
    }
    // A new output is fine.
    let out = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .current_dir(dir.path())
        .args(tool)
        .args(["x.aut", "new.aut"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&input).unwrap(), original);
}

#[test]
fn reduce_refuses_to_overwrite_its_input() {
    assert_refuses_own_input(&["lts", "reduce", "-q"]);
}

#[test]
fn convert_refuses_to_overwrite_its_input() {
    assert_refuses_own_input(&["lts", "convert", "-q"]);
}

// The tests that measure a child's peak RSS are in tests/memory.rs: a child's figure starts
// at this process's RSS (`common::run_measured`), which this file's in-process tests drive up.

#[test]
fn invalid_utf8_in_aut_is_a_malformed_file_in_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("x.aut");
    std::fs::write(&a, b"des (0, 2, 2)\n(0, \"a\", 1)\n(1, \"b\xff\", 0)\n").unwrap();
    let p = a.to_str().unwrap();
    let o = dir.path().join("o.slts");
    let o = o.to_str().unwrap();
    for args in [
        vec!["lts", "info", p],
        vec!["lts", "convert", p, o],
        vec!["lts", "reduce", p, o],
        vec!["lts", "compare", p, p],
        vec!["lts", "deadlocks", p],
        vec!["explore", p],
    ] {
        let out = spillway(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("x.aut:3:7:") && err.contains("UTF-8"),
            "{args:?}: {err}"
        );
        assert!(!Path::new(o).exists());
    }
}

#[test]
fn compare_exits_1_when_not_equivalent() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.aut");
    let b = dir.path().join("b.aut");
    let c = dir.path().join("c.aut");
    std::fs::write(&a, "des (0, 2, 3)\n(0, \"x\", 1)\n(0, \"x\", 2)\n").unwrap();
    std::fs::write(&b, "des (0, 1, 2)\n(0, \"x\", 1)\n").unwrap();
    std::fs::write(&c, "des (0, 1, 2)\n(0, \"y\", 1)\n").unwrap();
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    for (x, y, code, verdict) in [(a, b, 0, "equivalent"), (a, c, 1, "not equivalent")] {
        for relation in ["--strong", "--branching"] {
            let out = spillway(&["lts", "compare", relation, x, y, "-q"]);
            assert_eq!(out.status.code(), Some(code), "{x} {y} {relation}");
            assert!(String::from_utf8_lossy(&out.stdout).starts_with(verdict));
        }
    }
    // Errors are above 1: a missing file (4), a malformed one (3).
    let out = spillway(&["lts", "compare", a, "/nonexistent.aut"]);
    assert_eq!(out.status.code(), Some(4));
    std::fs::write(c, "des (0, 1, 2)\n(0, \"y\" 1)\n").unwrap();
    let out = spillway(&["lts", "compare", a, c]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn aut_output_refuses_labels_it_cannot_represent() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("q.aut");
    // Read as CADP does (first and last comma): the label is `say "hi"`.
    std::fs::write(&a, "des (0, 1, 2)\n(0, \"say \"hi\"\", 1)\n").unwrap();
    let native = dir.path().join("q.slts");
    let back = dir.path().join("back.aut");
    let out = spillway(&[
        "lts",
        "convert",
        a.to_str().unwrap(),
        native.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = spillway(&["lts", "info", "--json", native.to_str().unwrap()]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["labels"][0]["label"], "say \"hi\"");
    for input in [&a, &native] {
        let out = spillway(&[
            "lts",
            "convert",
            input.to_str().unwrap(),
            back.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("back.aut") && err.contains("double quote"),
            "{err}"
        );
        assert!(!back.exists() && !dir.path().join("back.aut.partial").exists());
    }
    // The same for a PNML transition name written by explore.
    let net = dir.path().join("n.pnml");
    std::fs::write(
        &net,
        r#"<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">
<place id="p"><initialMarking><text>1</text></initialMarking></place>
<transition id="t"><name><text>say &quot;hi&quot;</text></name></transition>
<arc id="a" source="p" target="t"/></page></net></pnml>"#,
    )
    .unwrap();
    let out = spillway(&[
        "explore",
        net.to_str().unwrap(),
        "-o",
        back.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("double quote"), "{err}");
    assert!(!back.exists());
}

#[test]
fn fsm_round_trip_keeps_counts_and_bisimilarity_and_every_tool_reads_fsm() {
    let dir = tempfile::tempdir().unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/Philosophers-PT-000005.pnml");
    let slts = dir.path().join("p.slts");
    let out = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "-o",
        slts.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Also an LTS whose highest states have no transition and whose initial state is not 0.
    let aut = dir.path().join("iso.aut");
    std::fs::write(
        &aut,
        "des (2, 3, 7)\n(2, \"a\", 0)\n(0, \"b(1, 2)\", 1)\n(1, \"tau\", 2)\n",
    )
    .unwrap();
    for (input, states, transitions) in [(&slts, 243u64, 945u64), (&aut, 7, 3)] {
        let stem = input.file_stem().unwrap().to_str().unwrap();
        let fsm = dir.path().join(format!("{stem}.fsm"));
        let back = dir.path().join(format!("{stem}.back.slts"));
        for (from, to) in [(input, &fsm), (&fsm, &back)] {
            let out = spillway(&[
                "lts",
                "convert",
                "-q",
                from.to_str().unwrap(),
                to.to_str().unwrap(),
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (a, b) = (Lts::load(input).unwrap(), Lts::load(&back).unwrap());
        assert_eq!(
            (b.states as u64, b.transitions() as u64),
            (states, transitions)
        );
        // Same edges with the same label names (label ids follow first use in .fsm).
        let named = |l: &Lts| -> Vec<(u32, String, u32)> {
            edges_of(l)
                .into_iter()
                .map(|(s, x, d)| (s, l.labels[x as usize].clone(), d))
                .collect()
        };
        assert_eq!((a.initial, named(&a)), (b.initial, named(&b)), "{stem}");
        assert_eq!(compare(a, b).unwrap().verdict, Equivalence::Equivalent);
        // Every tool takes .fsm input.
        let f = fsm.to_str().unwrap();
        let out = spillway(&["lts", "info", "--json", f]);
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (j["format"].as_str(), j["states"].as_u64()),
            (Some("fsm"), Some(states))
        );
        let red = dir.path().join(format!("{stem}.min.fsm"));
        for args in [
            vec!["lts", "reduce", "-q", f, red.to_str().unwrap()],
            vec!["lts", "compare", "-q", f, input.to_str().unwrap()],
            vec![
                "lts",
                "compare",
                "-q",
                red.to_str().unwrap(),
                input.to_str().unwrap(),
            ],
            vec!["lts", "deadlocks", "-q", f],
        ] {
            let out = spillway(&args);
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // A malformed .fsm: exit 3 with file:line:column, in every tool.
    let bad = dir.path().join("bad.fsm");
    std::fs::write(&bad, "---\n---\n1 2 \"a\"\n2 0 \"b\"\n").unwrap();
    let b = bad.to_str().unwrap();
    let o = dir.path().join("o.slts");
    for args in [
        vec!["lts", "info", b],
        vec!["lts", "convert", b, o.to_str().unwrap()],
        vec!["lts", "reduce", b, o.to_str().unwrap()],
        vec!["lts", "compare", b, b],
        vec!["lts", "deadlocks", b],
    ] {
        let out = spillway(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("bad.fsm:4:3:") && err.contains("numbered from 1"),
            "{err}"
        );
    }
}

#[test]
fn an_lts_without_states_is_refused_alike_by_every_tool() {
    use spillway::lts::native::NativeWriter;
    use spillway::lts::{LtsSink, LtsSummary};
    let dir = tempfile::tempdir().unwrap();
    // No spillway command writes one (every LTS has its initial state), but the writer does
    // what it is told: a crafted or damaged file of 0 states.
    let z = dir.path().join("z.slts");
    let mut w = NativeWriter::create(&z).unwrap();
    w.finish(&LtsSummary {
        states: 0,
        transitions: 0,
        initial: 0,
        deadlocks: 0,
    })
    .unwrap();
    drop(w);
    let za = dir.path().join("z.aut");
    std::fs::write(&za, "des (0, 0, 0)\n").unwrap();
    let o = dir.path().join("o.aut");
    let os = o.to_str().unwrap();
    // (input, exit code, what the message names): the native footer is corrupt data, the
    // .aut header malformed text, as for any other header inconsistency of either.
    for (input, code, says) in [
        (&z, 5, "z.slts: corrupted at byte offset"),
        (&za, 3, "z.aut:1:1:"),
    ] {
        let p = input.to_str().unwrap();
        for args in [
            vec!["lts", "info", p],
            vec!["lts", "convert", p, os],
            vec!["lts", "reduce", p, os],
            vec!["lts", "compare", p, p],
            vec!["lts", "deadlocks", p],
        ] {
            let out = spillway(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
            assert!(
                err.contains(says) && err.contains("state count"),
                "{args:?}: {err}"
            );
            assert!(!o.exists(), "{args:?} wrote an output");
        }
    }
}

#[test]
fn explore_reports_a_cut_short_aut_as_a_malformed_model_naming_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("short.aut");
    std::fs::write(&a, "des (0, 3, 3)\n(0, \"a\", 1)\n(1, \"b\", 2)\n").unwrap();
    let p = a.to_str().unwrap();
    // explore reads it as a model: exit 3; the lts tools read it as a data file: exit 5.
    for (args, code) in [(vec!["explore", p, "-q"], 3), (vec!["lts", "info", p], 5)] {
        let out = spillway(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.contains("truncated: the header announces 3 transitions but the file holds 2"),
            "{args:?}: {err}"
        );
        assert_eq!(err.matches("short.aut").count(), 1, "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------- two writers of one output

/// Holds an exclusive lock on `OUT.partial`, as a spillway process writing `OUT` does, with
/// `bytes` in it.
fn locked_partial(out: &Path, bytes: &[u8]) -> std::fs::File {
    let partial = PathBuf::from(format!("{}.partial", out.display()));
    std::fs::write(&partial, bytes).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&partial)
        .unwrap();
    f.try_lock().unwrap();
    f
}

#[test]
fn a_second_writer_of_the_same_output_is_refused_and_leaves_the_first_ones_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/vasy_0_1.aut");
    let i = input.to_str().unwrap();
    for ext in ["aut", "slts", "fsm", "dot"] {
        let out = dir.path().join(format!("o.{ext}"));
        let partial = PathBuf::from(format!("{}.partial", out.display()));
        let o = out.to_str().unwrap();
        let lock = locked_partial(&out, b"the first writer's bytes");
        for args in [
            vec!["lts", "convert", "-q", i, o],
            vec!["lts", "reduce", "-q", i, o],
        ] {
            let r = spillway(&args);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!(
                    "another spillway process is writing {o} ({o}.partial is locked)"
                )),
                "{args:?}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            assert_eq!(
                std::fs::read(&partial).unwrap(),
                b"the first writer's bytes"
            );
            assert!(!out.exists(), "{args:?}");
        }
        // Once the first writer is gone, its leftover is overwritten. A child another test
        // thread forks while the lock is held keeps a copy of its descriptor, and so the
        // lock, until it execs: give such a copy a moment to go.
        drop(lock);
        let mut r = spillway(&["lts", "convert", "-q", i, o]);
        for _ in 0..50 {
            if r.status.success() || !String::from_utf8_lossy(&r.stderr).contains("is locked") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            r = spillway(&["lts", "convert", "-q", i, o]);
        }
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(out.exists() && !partial.exists());
    }
}

#[test]
fn convert_keeps_the_states_may_repeat_flag_or_says_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/Philosophers-PT-000005.pnml");
    let pc = dir.path().join("pc.slts");
    // A cache of 150 states forgets some of the 243: states are numbered again.
    let o = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "--order",
        "dfs",
        "--store",
        "cache",
        "--cache-size",
        "150",
        "-q",
        "--no-progress",
        "-o",
        pc.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info = |p: &Path| -> serde_json::Value {
        let o = spillway(&["lts", "info", "--json", p.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let original = info(&pc);
    assert_eq!(original["states_may_repeat"], true);
    assert!(original["states"].as_u64().unwrap() > 243);
    // A native copy keeps the flag (it had claimed exact counts).
    let copy = dir.path().join("copy.slts");
    let o = spillway(&[
        "lts",
        "convert",
        pc.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let copied = info(&copy);
    assert_eq!(copied["states_may_repeat"], true);
    assert_eq!(copied["states"], original["states"]);
    // The text formats cannot record it: a note says so (not under -q), and the file is
    // written all the same.
    for ext in ["aut", "fsm"] {
        let out = dir.path().join(format!("c.{ext}"));
        let o = spillway(&[
            "lts",
            "convert",
            pc.to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(
            err.starts_with("spillway: note: ")
                && err.contains("may hold a state more than once")
                && err.contains(&format!("c.{ext} cannot record that")),
            "{err}"
        );
        let o = spillway(&[
            "lts",
            "convert",
            "-q",
            pc.to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success() && o.stderr.is_empty());
    }
}

#[test]
fn a_cut_short_aut_announcing_huge_counts_is_truncated_in_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("hugem.aut");
    // 40 bytes announcing 4·10^12 transitions: a cut-short file (exit 5), not a job too
    // large for the machine (exit 6, "needs about 72.8 TiB").
    std::fs::write(&a, "des (0, 4000000000000, 2)\n(0, \"a\", 1)\n").unwrap();
    let one = dir.path().join("one.aut");
    std::fs::write(&one, "des (0, 1, 2)\n(0, \"a\", 1)\n").unwrap();
    let (p, o) = (a.to_str().unwrap(), dir.path().join("r.aut"));
    for args in [
        vec!["lts", "info", p],
        vec!["lts", "convert", p, o.to_str().unwrap()],
        vec!["lts", "reduce", p, o.to_str().unwrap()],
        vec!["lts", "deadlocks", p],
        vec!["lts", "compare", p, one.to_str().unwrap()],
        vec!["lts", "compare", one.to_str().unwrap(), p],
    ] {
        let out = spillway(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {err}");
        assert!(
            err.contains(
                "hugem.aut: truncated: the header announces 4000000000000 transitions but the file holds 1"
            ),
            "{args:?}: {err}"
        );
        assert!(!err.contains("TiB"), "{args:?}: {err}");
    }
    let out = spillway(&["lts", "reduce", p, o.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "of 2 states, 4000000000000 transitions (the file can hold at most 7) needs about"
    ));
}

/// Errors about the output name the path the user gave, not the `OUT.partial` it is
/// written through (which no longer exists when the message is read).
#[test]
fn output_errors_name_the_output_not_its_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let q = d.join("q.aut");
    std::fs::write(&q, "des (0, 1, 2)\n(0, \"say \"hi\"\", 1)\n").unwrap();
    let model = common::toggles_file(d, 12);
    let (missing, out, dot) = (d.join("missing/x.aut"), d.join("out.aut"), d.join("t.dot"));
    for (args, says) in [
        (
            vec![
                "lts",
                "convert",
                q.to_str().unwrap(),
                missing.to_str().unwrap(),
            ],
            format!("{}: No such file or directory", missing.display()),
        ),
        (
            vec!["lts", "convert", q.to_str().unwrap(), out.to_str().unwrap()],
            format!(
                "{}: label \"say \\\"hi\\\"\" contains a double quote",
                out.display()
            ),
        ),
        (
            vec![
                "explore",
                model.to_str().unwrap(),
                "-q",
                "-o",
                dot.to_str().unwrap(),
            ],
            format!(
                "{}: more than 10000 transitions are too many",
                dot.display()
            ),
        ),
    ] {
        let o = spillway(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(&says), "{args:?}: {err}");
        assert!(!err.contains(".partial"), "{args:?}: {err}");
    }
}

#[test]
fn info_of_an_lts_without_transitions_gives_no_bytes_per_transition() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("one.aut");
    std::fs::write(&a, "des (0, 0, 1)\n").unwrap();
    let o = spillway(&["lts", "info", a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains("size          14 bytes (no transitions)"),
        "{text}"
    );
    let o = spillway(&["lts", "info", "--json", a.to_str().unwrap()]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["bytes_per_transition"].is_null(), "{j}");
}

/// An input that is not a regular file is refused at once with exit 2, naming it: a FIFO
/// that no process writes to had blocked every `lts` tool forever in `open`.
#[test]
fn lts_tools_refuse_inputs_that_are_not_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("p.aut");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let f = fifo.to_str().unwrap();
    let out = dir.path().join("o.slts");
    let sub = dir.path().join("d.slts");
    std::fs::create_dir(&sub).unwrap();
    for args in [
        vec!["lts", "info", f],
        vec!["lts", "deadlocks", f],
        vec!["lts", "convert", f, out.to_str().unwrap()],
        vec!["lts", "compare", f, f],
        vec!["lts", "info", sub.to_str().unwrap()],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?}: still running after 20 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}");
    }
}
