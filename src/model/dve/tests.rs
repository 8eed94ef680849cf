//! Unit tests of the DVE front end: semantics on small models whose state spaces are known,
//! and the `Model` contract (`fire` reproduces `successors`, ascending ids).

use super::*;
use std::collections::{HashMap, VecDeque};

fn model(src: &str) -> DveModel {
    parse(src.as_bytes(), Path::new("t.dve")).unwrap_or_else(|e| panic!("{e}"))
}

fn error(src: &str) -> String {
    match parse(src.as_bytes(), Path::new("t.dve")) {
        Ok(_) => panic!("accepted: {src}"),
        Err(e) => e.to_string(),
    }
}

/// BFS; checks on every state that ids ascend and that `fire` and `enabled` agree with
/// `successors`. Returns (states, transitions, the states in discovery order).
fn explore(m: &DveModel) -> (usize, usize, Vec<Vec<u8>>) {
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut order = vec![init.clone()];
    seen.insert(init.clone(), 0);
    let mut queue = VecDeque::from([init]);
    let mut edges = 0;
    let mut fired = Vec::new();
    let mut en = Vec::new();
    while let Some(s) = queue.pop_front() {
        let mut succ = Vec::new();
        m.successors(&s, &mut |t, l, d| succ.push((t, l, d.to_vec())))
            .unwrap();
        m.enabled(&s, &mut en).unwrap();
        assert_eq!(
            en,
            succ.iter().map(|x| x.0).collect::<Vec<_>>(),
            "enabled differs from successors"
        );
        for w in succ.windows(2) {
            assert!(w[0].0 < w[1].0, "ids not ascending");
        }
        for (t, l, d) in succ {
            assert_eq!(m.fire(&s, t, &mut fired).unwrap(), Fired::Enabled(l));
            assert_eq!(fired, d, "fire differs from successors");
            assert_eq!(d.len(), m.state_len().unwrap());
            edges += 1;
            if !seen.contains_key(&d) {
                seen.insert(d.clone(), order.len());
                order.push(d.clone());
                queue.push_back(d);
            }
        }
        for t in 0..m.transition_count() as u32 {
            if !en.contains(&TransitionId(t)) {
                assert_eq!(
                    m.fire(&s, TransitionId(t), &mut fired).unwrap(),
                    Fired::Disabled
                );
            }
        }
    }
    (order.len(), edges, order)
}

#[test]
fn counter_wraps_into_the_error_state() {
    // x counts 0..=255; x = 256 is out of range: the error state (no successors).
    let m = model(
        "byte x; process P { state s; init s; trans s -> s { effect x = x + 1; }; } system async;",
    );
    let (states, edges, order) = explore(&m);
    assert_eq!((states, edges), (257, 256));
    assert!(m.is_error_state(order.last().unwrap()));
    assert_eq!(m.format_state(order.last().unwrap()), "(error state)");
}

#[test]
fn rendezvous_pairs_and_value_transfer() {
    // A sender offers 0..2 on c; two receivers take it. Labels name both halves.
    let m = model(
        "channel c;
         process S { byte v; state a; init a; trans a -> a { guard v < 3; sync c!v; effect v = v + 1; }; }
         process R1 { byte got; state w, d; init w; trans w -> d { sync c?got; }; }
         process R2 { byte got; state w, d; init w; trans w -> d { sync c?got; }; }
         system async;",
    );
    assert_eq!(m.transition_count(), 2);
    assert_eq!(m.label_name(LabelId(0)), "S.a->a|R1.w->d");
    let (states, edges, order) = explore(&m);
    // v=0: R1 or R2 takes 0 (2 states at v=1), then the other takes 1: (0,1) and (1,0) at v=2.
    assert_eq!((states, edges), (5, 4));
    let last = m.format_state(order.last().unwrap());
    assert!(last.contains("S:a(v=2)"), "{last}");
}

#[test]
fn buffered_channel_is_a_fifo() {
    // The producer sends 1, 2, 3 into a 2-slot buffer; the consumer receives in order and
    // adds to a running "order check" value.
    let m = model(
        "channel {byte} c[2];
         process P { byte n = 1; state a; init a; trans a -> a { guard n <= 3; sync c!n; effect n = n + 1; }; }
         process C { byte last, bad; state a; init a;
                     trans a -> a { sync c?last; effect bad = bad + (last != 0 && 0); }; }
         system async;",
    );
    let (states, edges, order) = explore(&m);
    // Reachable (sent k, received j) with 0 <= k - j <= 2, k <= 3: 9 pairs; sends from the 5
    // with k <= 2 and room, receives from the 5 with k > j.
    assert_eq!(states, 9);
    assert_eq!(edges, 10);
    let s = order
        .iter()
        .map(|s| m.format_state(s))
        .find(|s| s.contains("c=[(2),(3)]"))
        .expect("queue 2,3 reached");
    assert!(s.contains("C:a(last=1 bad=0)"), "{s}");
}

/// Fills a buffer of capacity `cap` by its only transition, one send per step, and returns
/// the number of steps before the deadlock (`None` if a state has other than one successor
/// before that, or the count does not follow the steps).
fn fill_buffer(cap: u32) -> Option<u32> {
    let m = model(&format!(
        "channel {{byte}} q[{cap}]; process P {{ state s; init s; trans s -> s {{ sync q!0; }}; }} system async;"
    ));
    let ch = &m.shared.prog.chans[0];
    let mut s = Vec::new();
    m.initial_state(&mut s).unwrap();
    let mut steps = 0;
    loop {
        let mut succ = Vec::new();
        m.successors(&s, &mut |_, _, d| succ.push(d.to_vec()))
            .unwrap();
        match succ.len() {
            0 => return Some(steps),
            1 if steps < cap => {}
            _ => return None,
        }
        s = succ.pop().unwrap();
        steps += 1;
        if ch.count(&s) != steps {
            return None;
        }
    }
}

#[test]
fn a_full_buffer_of_the_largest_capacity_is_full() {
    // The count takes 1, 2 or 4 bytes; a full buffer of 65,536 items counts 65,536, which 2
    // bytes would wrap to 0 (an empty-looking buffer: the state space loops instead of
    // ending in a deadlock). `cap` sends, all to new states: cap + 1 states, cap transitions,
    // 1 deadlock.
    for (cap, count_len) in [(255, 1), (256, 2), (65_535, 2), (65_536, 4)] {
        let m = model(&format!(
            "channel {{byte}} q[{cap}]; process P {{ state s; init s; }} system async;"
        ));
        assert_eq!(
            m.shared.prog.chans[0].count_len, count_len,
            "capacity {cap}"
        );
        assert_eq!(m.state_len(), Some(count_len as usize + cap as usize + 1));
        assert_eq!(fill_buffer(cap), Some(cap), "capacity {cap}");
    }
    // Receiving from a full buffer of 65,536 leaves 65,535 items.
    let m = model(
        "channel {byte} q[65536];
         process P { state s; init s; trans s -> s { sync q!7; }; }
         process C { byte x; state s; init s; trans s -> s { sync q?x; }; }
         system async;",
    );
    let ch = &m.shared.prog.chans[0];
    let mut full = Vec::new();
    m.initial_state(&mut full).unwrap();
    ch.set_count(&mut full, 65_536);
    let items = ch.items_off();
    full[items..items + 65_536].fill(7);
    let mut succ = Vec::new();
    m.successors(&full, &mut |_, _, d| succ.push(d.to_vec()))
        .unwrap();
    assert_eq!(succ.len(), 1, "only the receive is enabled");
    assert_eq!(ch.count(&succ[0]), 65_535);
    assert!(m.format_state(&succ[0]).contains("C:s(x=7)"));
}

#[test]
fn committed_states_take_priority() {
    // P moves a -> b (committed) -> c; while P is in b, Q cannot move.
    let m = model(
        "process P { state a, b, c; commit b; init a; trans a -> b {}, b -> c {}; }
         process Q { byte n; state q; init q; trans q -> q { guard n < 2; effect n = n + 1; }; }
         system async;",
    );
    let (states, edges, _) = explore(&m);
    // P at a or c: Q free (3 values of n each); P at b: Q blocked. 3 * 3 = 9 states,
    // edges: a->b (3), b->c (3), Q steps with P at a, b? no, c: 2 + 2 = 4 -> 10.
    assert_eq!((states, edges), (9, 10));
}

#[test]
fn rendezvous_in_committed_mode_needs_both_sides_committed() {
    // P and Z enter committed states together (a rendez-vous on `go`); then P's send on `c`
    // may pair with Z (committed) but not with Q (not committed).
    let m = model(
        "channel c, go;
         process P { state a, b, d; commit b; init a; trans a -> b { sync go!; }, b -> d { sync c!; }; }
         process Q { state x, y; init x; trans x -> y { sync c?; }; }
         process Z { state y, x; commit x; init y; trans y -> x { sync go?; }, x -> y { sync c?; }; }
         system async;",
    );
    let (states, edges, order) = explore(&m);
    assert_eq!((states, edges), (3, 2));
    for s in &order {
        let f = m.format_state(s);
        assert!(
            !f.contains("Q:y"),
            "Q received from a committed sender: {f}"
        );
    }
    // Without the commit clauses Q can receive too.
    let free = model(
        "channel c, go;
         process P { state a, b, d; init a; trans a -> b { sync go!; }, b -> d { sync c!; }; }
         process Q { state x, y; init x; trans x -> y { sync c?; }; }
         process Z { state y, x; init y; trans y -> x { sync go?; }, x -> y { sync c?; }; }
         system async;",
    );
    assert_eq!(explore(&free).0, 4);
}

#[test]
fn guard_faults_lead_to_the_error_state_and_short_circuit_does_not() {
    let m = model(
        "byte a[2]; byte i;
         process P { state s; init s; trans
            s -> s { guard i < 2 && a[i] == 0; effect i = i + 1; },
            s -> s { guard i == 3 || 1 / (i - 2) == 5; effect i = 3; };
         }
         system async;",
    );
    let (states, _, order) = explore(&m);
    // i: 0 -> 1 -> 2; at i = 2 the second guard divides by zero: error state. From i = 0 and
    // 1, 1/(i-2) is -0 or -1: false; i = 3 never reached without the fault.
    assert_eq!(states, 4);
    assert!(order.iter().any(|s| m.is_error_state(s)));
}

#[test]
fn index_out_of_bounds_in_an_effect_is_an_error() {
    let m = model(
        "byte a[2]; byte i;
         process P { state s; init s; trans s -> s { guard i < 5; effect a[i] = 1, i = i + 1; }; }
         system async;",
    );
    let (states, _, order) = explore(&m);
    assert_eq!(states, 4); // i = 0, 1, 2, then a[2] = 1 faults.
    assert!(m.is_error_state(order.last().unwrap()));
}

#[test]
fn int_is_signed_16_bit_and_byte_unsigned() {
    let m = model(
        "int x = -32767; byte b = 1;
         process P { state s; init s; trans s -> s { guard x > -32768; effect x = x - 1; },
                                              s -> s { guard b > 0; effect b = b - 1; }; }
         system async;",
    );
    let (states, _, _) = explore(&m);
    assert_eq!(states, 4); // (x, b) in {-32767, -32768} x {1, 0}
}

#[test]
fn sync_system_moves_every_process_at_once() {
    let m = model(
        "byte g;
         process A { byte n; state s; init s; trans s -> s { guard n < 2; effect n = n + 1; }, s -> s { effect g = 1; }; }
         process B { state u, v; init u; trans u -> v {}, v -> u {}; }
         system sync;",
    );
    assert_eq!(m.transition_count(), 4);
    assert_eq!(m.label_count(), 4);
    let labels: Vec<String> = (0..5).map(|l| m.label_name(LabelId(l))).collect();
    assert_eq!(
        labels,
        [
            "A.s->s#1|B.u->v",
            "A.s->s#1|B.v->u",
            "A.s->s#2|B.u->v",
            "A.s->s#2|B.v->u",
            "?4"
        ]
    );
    // Independent search: (n, g, B in v) where each step moves A and B together.
    let mut seen = std::collections::HashSet::from([(0u8, 0u8, false)]);
    let mut queue = VecDeque::from([(0u8, 0u8, false)]);
    let mut edges = 0;
    while let Some((n, g, b)) = queue.pop_front() {
        let mut next = vec![(n, 1, !b)];
        if n < 2 {
            next.push((n + 1, g, !b));
        }
        for x in next {
            edges += 1;
            if seen.insert(x) {
                queue.push_back(x);
            }
        }
    }
    let (states, e, _) = explore(&m);
    assert_eq!((states, e), (seen.len(), edges));
    assert_eq!(states, 9);
    assert!(m.dependent(TransitionId(0), TransitionId(1)));
}

#[test]
fn forks_share_the_compiled_model() {
    // A copy for another thread owns only its scratch buffers: the ids, the program and the
    // labels stay one, and the copy explores as the original does.
    let m = model(
        "channel c; byte x;
         process S { state a, b; init a; trans a -> b { sync c!; effect x = 1; }, b -> a {}; }
         process R { state a; init a; trans a -> a { sync c?; }; }
         system async;",
    );
    let f = m.fork().unwrap();
    assert_eq!(Arc::strong_count(&m.shared), 2);
    let mut s = Vec::new();
    m.initial_state(&mut s).unwrap();
    for _ in 0..3 {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        m.successors(&s, &mut |t, l, d| a.push((t, l, d.to_vec())))
            .unwrap();
        f.successors(&s, &mut |t, l, d| b.push((t, l, d.to_vec())))
            .unwrap();
        assert_eq!(a, b);
        s = a.pop().unwrap().2;
    }
    assert_eq!(f.label_name(LabelId(0)), "S.a->b|R.a->a");
    drop(f);
    assert_eq!(Arc::strong_count(&m.shared), 1);
}

#[test]
fn sync_system_global_conflict_is_an_error() {
    // Both processes assign g in the same step: DiVinE's error state.
    let m = model(
        "byte g;
         process A { state s; init s; trans s -> s { effect g = 1; }; }
         process B { state s; init s; trans s -> s { effect g = 2; }; }
         system sync;",
    );
    let (states, _, order) = explore(&m);
    assert_eq!(states, 2);
    assert!(m.is_error_state(&order[1]));
}

#[test]
fn rendezvous_rules_from_divine() {
    // Both halves assign the global g: error. A typed channel converts 300 to a byte (44).
    // A sender with two values and a receiver with one target: error. A sender without value
    // and a receiver with a target: nothing is transferred.
    let m = model(
        "byte g; channel a; channel {byte} t[0]; channel m; channel e;
         process S { state s0, s1, s2, s3, s4; init s0; trans
             s0 -> s1 { sync t!300; },
             s1 -> s2 { sync e!; },
             s2 -> s3 { sync m!{1, 2}; },
             s3 -> s4 { sync a!; effect g = 1; }; }
         process R { byte x = 9, y = 7; state r0, r1, r2, r3, r4; init r0; trans
             r0 -> r1 { sync t?x; },
             r1 -> r2 { sync e?y; },
             r2 -> r3 { sync m?x; },
             r3 -> r4 { sync a?; effect g = 2; }; }
         system async;",
    );
    let (states, _, order) = explore(&m);
    let shown: Vec<String> = order.iter().map(|s| m.format_state(s)).collect();
    assert_eq!(states, 4, "{shown:?}");
    assert!(shown[1].contains("R:r1(x=44 y=7)"), "{}", shown[1]);
    assert!(shown[2].contains("R:r2(x=44 y=7)"), "{}", shown[2]);
    assert_eq!(shown[3], "(error state)");
    let conflict = model(
        "byte g, h; channel a;
         process S { state s0, s1; init s0; trans s0 -> s1 { sync a!; effect g = 1, h = 1; }; }
         process R { state r0, r1; init r0; trans r0 -> r1 { sync a?; effect g = 2; }; }
         process Q { state q0, q1; init q0; trans q0 -> q1 { sync a?; effect h = 2; }; }
         system async;",
    );
    let (states, _, order) = explore(&conflict);
    // S with R: both assign g, error; S with Q: both assign h, error.
    assert_eq!(states, 2);
    assert!(conflict.is_error_state(&order[1]));
}

#[test]
fn process_state_tests_and_foreign_variables() {
    let m = model(
        "process P { byte x = 2; state a, b; init a; trans a -> b {}; }
         process Q { state s, t; init s; trans s -> t { guard P.b && P->x == 2; }; }
         system async;",
    );
    let (states, edges, _) = explore(&m);
    assert_eq!((states, edges), (3, 2));
}

#[test]
fn independence_follows_read_and_write_sets() {
    let m = model(
        "byte g, h;
         process P { state a; init a; trans a -> a { effect g = 1; }; }
         process Q { state a; init a; trans a -> a { effect h = 1; }, a -> a { guard g == 0; }; }
         system async;",
    );
    // Ids: P: 0; Q: 1 (writes h), 2 (reads g).
    assert!(!m.dependent(TransitionId(0), TransitionId(1)));
    assert!(m.dependent(TransitionId(0), TransitionId(2)));
    assert!(m.dependent(TransitionId(1), TransitionId(2))); // same process
}

#[test]
fn syntax_and_semantic_errors_name_the_position() {
    let e = error("byte x\nprocess P { state s; init s; } system async;");
    assert!(e.contains("t.dve:2:1") && e.contains("expected"), "{e}");
    let e = error("process P { state s; init s; trans s -> s { effect y = 1; }; } system async;");
    assert!(
        e.contains("1:52") && e.contains("undeclared variable 'y'"),
        "{e}"
    );
    let e = error("process P { state s; init t; } system async;");
    assert!(e.contains("1:27") && e.contains("'t'"), "{e}");
    let e = error("const byte N = 3; process P { state s; init s; trans s -> s { effect N = 1; }; } system async;");
    assert!(e.contains("constant"), "{e}");
    let e = error(
        "byte a; process P { state s; init s; trans s -> s { guard a[0] == 1; }; } system async;",
    );
    assert!(e.contains("not an array"), "{e}");
    let e = error("process P { state s; init s; } system async property P;");
    assert!(e.contains("unsupported"), "{e}");
    let e = error("byte x = 300; process P { state s; init s; } system async;");
    assert!(e.contains("out of the range"), "{e}");
    let deep = format!(
        "byte x; process P {{ state s; init s; trans s -> s {{ guard {}x{}; }}; }} system async;",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert!(error(&deep).contains("nested"));
    let long = format!(
        "byte x; process P {{ state s; init s; trans s -> s {{ guard x{}; }}; }} system async;",
        "+1".repeat(5000)
    );
    assert!(error(&long).contains("nested"));
}

/// `senders` sending and `receivers` receiving transitions on channel `c` (declared at 2:9),
/// in two processes, and `plain` (at least one) transitions of a third.
fn pairs_src(senders: usize, receivers: usize, plain: usize) -> String {
    let trans = |n: usize, what: &str| vec![format!("s -> s {{ {what} }}"); n].join(", ");
    format!(
        "byte x;\nchannel c;\n\
         process S {{ state s; init s; trans {}; }}\n\
         process R {{ state s; init s; trans {}; }}\n\
         process Q {{ state s; init s; trans {}; }}\n\
         system async;",
        trans(senders, "sync c!;"),
        trans(receivers, "sync c?;"),
        trans(plain.max(1), "effect x = 1;")
    )
}

#[test]
fn the_summary_counts_transition_ids_in_words_that_agree() {
    let one = model("process P { state s; init s; trans s -> s {}; } system async;");
    assert_eq!(
        one.describe(),
        "DVE (async): 1 process, 1 transition id (0 rendez-vous pairs), 1-byte states"
    );
    let m = model(&pairs_src(2, 1, 1));
    assert_eq!(
        m.describe(),
        "DVE (async): 3 processes, 3 transition ids (2 rendez-vous pairs), 4-byte states"
    );
    let m = model(&pairs_src(1, 1, 1));
    assert!(m
        .describe()
        .contains("2 transition ids (1 rendez-vous pair)"));
    let m = model(&pairs_src(1, 1, 1).replace("async", "sync"));
    assert_eq!(
        m.describe(),
        "DVE (sync): 3 processes, 1 transition id (one per combination of process transitions), 4-byte states"
    );
}

#[test]
fn rendezvous_pairs_are_bounded() {
    // 1024 × 1024 pairs and the one transition of Q: one id over the limit of 2^20, refused
    // at the channel before any id is built.
    let e = error(&pairs_src(1024, 1024, 1));
    assert!(
        e.contains("t.dve:2:9: unsupported: more than 1048576 transition ids (1048577): channel 'c' pairs each of its 1024 sending transitions with every receiving transition of another process, 1048576 rendez-vous pairs"),
        "{e}"
    );
    // At the limit: accepted, every pair numbered and named.
    let m = model(&pairs_src(1024, 1023, 1024));
    assert_eq!(m.transition_count(), 1 << 20);
    assert_eq!(m.label_count(), 1 << 20);
    assert_eq!(
        m.label_name(LabelId(1024 * 1023 - 1)),
        "S.s->s#1024|R.s->s#1023"
    );
    assert_eq!(m.label_name(LabelId((1 << 20) - 1)), "Q.s->s#1024");
}

#[test]
fn whole_model_limits_point_at_their_construct() {
    // 21 processes of 2 transitions: 2^21 steps, refused at `system` (line 22).
    let mut src = String::new();
    for p in 0..21 {
        src.push_str(&format!(
            "process P{p} {{ state a, b; init a; trans a -> b {{}}, b -> a {{}}; }}\n"
        ));
    }
    src.push_str("system sync;");
    let e = error(&src);
    assert!(
        e.contains("t.dve:22:1: unsupported: a 'system sync' with more than 1048576 combinations of process transitions (the transition counts of its 21 processes multiply to 2097152)"),
        "{e}"
    );
    // A process without transitions: no step at all, nothing to refuse.
    let m = model(&src.replace(
        "process P20 { state a, b; init a; trans a -> b {}, b -> a {}; }",
        "process P20 { state a; init a; }",
    ));
    assert_eq!(m.transition_count(), 0);
    // 16 arrays fill the 1 MiB; whatever comes next is named where it is declared.
    let arrays = (0..16)
        .map(|i| format!("b{i}[65536]"))
        .collect::<Vec<_>>()
        .join(", ");
    let e = error(&format!(
        "byte {arrays};\nprocess P {{ state s; init s; }}\nsystem async;"
    ));
    assert!(
        e.contains("t.dve:2:9: unsupported: a state vector over 1048576 bytes (the control state of process 'P' takes it to 1048577 bytes)"),
        "{e}"
    );
    let e = error(&format!(
        "byte {arrays};\nint x;\nprocess P {{ state s; init s; }}\nsystem async;"
    ));
    assert!(
        e.contains("t.dve:2:5: unsupported: a state vector over 1048576 bytes (variable 'x' takes it to 1048578 bytes)"),
        "{e}"
    );
    let e = error(&format!(
        "byte {arrays};\nchannel {{byte}} q[1];\nprocess P {{ state s; init s; }}\nsystem async;"
    ));
    assert!(
        e.contains("t.dve:2:16: unsupported: a state vector over 1048576 bytes (channel 'q' takes it to 1048578 bytes)"),
        "{e}"
    );
}

#[test]
fn arrays_without_index_and_oversized_initialisers_behave_as_in_divine() {
    // `a` alone is a[0]; the third initial value of `a` lands in `b`, which has no
    // initialiser of its own, while `c`'s own initialiser wins over the spill of `b`'s.
    let m = model(
        "byte a[2] = {1, 2, 3}; byte b; byte c2[1] = {4, 5}; byte c = 6;
         process P { state s; init s; trans s -> s { guard a < 3; effect a = a + 1; }; }
         system async;",
    );
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    assert_eq!(&init[..5], &[1, 2, 3, 4, 6]);
    let (states, _, order) = explore(&m);
    assert_eq!(states, 3);
    assert!(m.format_state(order.last().unwrap()).contains("a=[3,2]"));
}

#[test]
fn short_initialisers_fill_with_zero_and_spills_stay_in_their_scope() {
    // Fewer values than elements: the rest are 0. A local array's extra values land in the
    // locals that follow it.
    let m = model(
        "byte f[3] = {7}; byte g;
         process P { byte l[1] = {8, 9}; byte k; state s; init s; trans s -> s {}; }
         system async;",
    );
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    // f, g, then P's control state, l, k.
    assert_eq!(init, [7, 0, 0, 0, 0, 8, 9]);
    // Past the last variable of the scope, extra values are refused, never dropped or
    // written into the next process's control state.
    let e = error(
        "process P { byte l[1] = {8, 9}; state s; init s; trans s -> s {}; }
         process Q { state t; init t; trans t -> t {}; }
         system async;",
    );
    assert!(
        e.contains("array 'l' has 1 element and 2 initialisers")
            && e.contains("the last local variable of 'P'"),
        "{e}"
    );
}

#[test]
fn constants_fold_and_size_arrays() {
    let m = model(
        "const byte N = 3; const int K[2] = {5, -1}; byte a[N + 1];
         process P { state s; init s; trans s -> s { guard a[N] < K[0] + K[1]; effect a[N] = a[N] + 1; }; }
         system async;",
    );
    assert_eq!(m.state_len(), Some(5));
    let (states, _, _) = explore(&m);
    assert_eq!(states, 5); // a[3] in 0..=4
}
