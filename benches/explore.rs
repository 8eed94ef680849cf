//! Micro benchmarks: successor generation and full-store BFS on the shipped models, and the
//! state hash at the widths of the reference nets' vectors (Kanban-PT-00005 16 bytes,
//! SharedMemory-PT-000010 132, Peterson-PT-3 260).
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

fn state_hash(c: &mut Criterion) {
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut g = c.benchmark_group("state_hash");
    g.throughput(Throughput::Elements(1));
    for width in [16, 132, 260] {
        g.bench_function(format!("{width}_bytes"), |b| {
            let mut at = 0;
            b.iter(|| {
                at = (at + 97) % (bytes.len() - width);
                spillway::store::full::state_hash(&bytes[at..at + width])
            })
        });
    }
    g.finish();
}

criterion_group!(benches, successors, bfs_full, state_hash);
criterion_main!(benches);
