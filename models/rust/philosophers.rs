//! Dining philosophers written against spillway's typed Rust API.
//!
//! The same system as the MCC net `Philosophers-PT-N`: philosopher i takes its two forks one
//! at a time in either order, eats, then puts both back. For N = 5 it has 243 states and 945
//! transitions, as the net does. Run it with `cargo run --release --example philosophers [N]`.

use serde::{Deserialize, Serialize};
use spillway::model::typed::{Typed, TypedModel};
use spillway::run::{ExploreConfig, Search};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phil {
    Think,
    /// Holds its own fork (fork i).
    HasOwn,
    /// Holds its neighbour's fork (fork i-1).
    HasOther,
    Eat,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    pub phils: Vec<Phil>,
    /// `forks[i]` is true while fork i lies on the table.
    pub forks: Vec<bool>,
}

#[derive(Clone, Copy, Debug)]
pub enum Action {
    TakeOwnFirst(usize),
    TakeOtherFirst(usize),
    TakeOtherSecond(usize),
    TakeOwnSecond(usize),
    Release(usize),
}

pub struct Philosophers {
    pub n: usize,
}

impl Philosophers {
    fn other(&self, i: usize) -> usize {
        (i + self.n - 1) % self.n
    }
}

impl TypedModel for Philosophers {
    type State = Table;
    type Action = Action;

    fn initial(&self) -> Table {
        Table {
            phils: vec![Phil::Think; self.n],
            forks: vec![true; self.n],
        }
    }

    fn actions(&self, _s: &Table, out: &mut Vec<Action>) {
        for i in 0..self.n {
            out.extend([
                Action::TakeOwnFirst(i),
                Action::TakeOtherFirst(i),
                Action::TakeOtherSecond(i),
                Action::TakeOwnSecond(i),
                Action::Release(i),
            ]);
        }
    }

    fn next(&self, s: &Table, a: &Action) -> Option<Table> {
        let mut t = s.clone();
        match *a {
            Action::TakeOwnFirst(i) if s.phils[i] == Phil::Think && s.forks[i] => {
                t.phils[i] = Phil::HasOwn;
                t.forks[i] = false;
            }
            Action::TakeOtherFirst(i) if s.phils[i] == Phil::Think && s.forks[self.other(i)] => {
                t.phils[i] = Phil::HasOther;
                t.forks[self.other(i)] = false;
            }
            Action::TakeOtherSecond(i) if s.phils[i] == Phil::HasOwn && s.forks[self.other(i)] => {
                t.phils[i] = Phil::Eat;
                t.forks[self.other(i)] = false;
            }
            Action::TakeOwnSecond(i) if s.phils[i] == Phil::HasOther && s.forks[i] => {
                t.phils[i] = Phil::Eat;
                t.forks[i] = false;
            }
            Action::Release(i) if s.phils[i] == Phil::Eat => {
                t.phils[i] = Phil::Think;
                t.forks[i] = true;
                t.forks[self.other(i)] = true;
            }
            _ => return None,
        }
        Some(t)
    }

    fn label(&self, a: &Action) -> String {
        format!("{a:?}")
    }

    fn format_state(&self, s: &Table) -> Option<String> {
        Some(format!("{:?} forks {:?}", s.phils, s.forks))
    }
}

#[allow(dead_code)]
fn main() {
    let n = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a positive integer"))
        .unwrap_or(5);
    let stats = Search::model(&Typed::new(Philosophers { n }))
        .config(ExploreConfig::default())
        .run()
        .expect("exploration failed");
    println!(
        "{n} philosophers: {} states, {} transitions, {} deadlocks",
        stats.states, stats.transitions, stats.deadlocks
    );
}
