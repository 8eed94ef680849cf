//! Every MCC net under ../shared/models/mcc loads and starts exploring: parse, compile, and a
//! bounded BFS of the first states, with successors cross-checked against `fire`.

mod common;

use spillway::model::{petri, pnml, Fired, TransitionId};
use std::collections::{HashSet, VecDeque};

fn nets() -> Vec<std::path::PathBuf> {
    let Some(dir) = common::shared_models() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for family in std::fs::read_dir(dir.join("mcc")).unwrap() {
        let family = family.unwrap().path();
        if family.is_dir() {
            for f in std::fs::read_dir(&family).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "pnml") {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn every_mcc_net_loads_and_starts_exploring() {
    let nets = nets();
    if nets.is_empty() {
        return;
    }
    assert_eq!(nets.len(), 85, "expected the 85 MCC nets");
    for path in &nets {
        let net = pnml::parse_file(path).unwrap_or_else(|e| panic!("{e}"));
        let bits = petri::initial_bits(&net, petri::TokenWidth::Auto);
        let model = petri::build(net, bits).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut init = Vec::new();
        model.initial_state(&mut init).unwrap();
        let mut seen: HashSet<Vec<u8>> = HashSet::from([init.clone()]);
        let mut queue = VecDeque::from([init]);
        let mut fired = Vec::new();
        let mut expanded = 0;
        while let Some(s) = queue.pop_front() {
            if expanded == 300 {
                break;
            }
            expanded += 1;
            let mut succs = Vec::new();
            model
                .successors(&s, &mut |t, l, d| succs.push((t, l, d.to_vec())))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let ids: Vec<TransitionId> = succs.iter().map(|x| x.0).collect();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "{}: not ascending",
                path.display()
            );
            for (t, l, d) in succs {
                assert_eq!(model.fire(&s, t, &mut fired).unwrap(), Fired::Enabled(l));
                assert_eq!(
                    fired,
                    d,
                    "{}: fire disagrees with successors",
                    path.display()
                );
                if seen.insert(d.clone()) {
                    queue.push_back(d);
                }
            }
        }
        assert!(expanded > 0);
    }
}
