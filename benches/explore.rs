//! Micro benchmarks: successor generation and full-store BFS on the shipped models.
//! The end-to-end table (states/s, peak RSS per model) is `tools/bench_table.py`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spillway::engine::EngineOptions;
use spillway::model::{petri, pnml, Model};
use spillway::run::{ExploreConfig, Search};
use std::path::Path;

fn model(name: &str) -> Box<dyn Model> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name);
    let net = pnml::parse_file(&path).unwrap();
    petri::build(net, 8).unwrap()
}

fn successors(c: &mut Criterion) {
    let m = model("Philosophers-PT-000005.pnml");
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    let mut g = c.benchmark_group("successors");
    g.throughput(Throughput::Elements(1));
    g.bench_function("philosophers5_initial", |b| {
        b.iter(|| {
            let mut n = 0u32;
            m.successors(&init, &mut |_, _, s| n += s[0] as u32)
                .unwrap();
            n
        })
    });
    g.finish();
}

fn bfs_full(c: &mut Criterion) {
    let m = model("Philosophers-PT-000005.pnml");
    let cfg = ExploreConfig {
        engine: EngineOptions {
            progress: false,
            threads: 1,
        },
        ..ExploreConfig::default()
    };
    let mut g = c.benchmark_group("bfs_full");
    g.throughput(Throughput::Elements(243));
    g.bench_function("philosophers5", |b| {
        b.iter(|| {
            Search::model(m.as_ref())
                .config(cfg.clone())
                .run()
                .unwrap()
                .states
        })
    });
    g.finish();
}

criterion_group!(benches, successors, bfs_full);
criterion_main!(benches);
