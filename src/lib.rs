//! # spillway
//!
//! Generates very large state spaces on modest machines. A model (a Place/Transition Petri
//! net in PNML, an explicit LTS in Aldebaran `.aut`, a DVE process system as in DiVinE and the
//! BEEM benchmark, or a model written in Rust) is explored state by state; the labelled
//! transition system is streamed to a compressed file.
//!
//! Data flows one way: [`model`] → [`engine`] → [`store`] → [`lts`], driven by [`run`]. See
//! docs/ARCHITECTURE.md.
//!
//! ```
//! use spillway::run::{ExploreConfig, Search};
//! use std::path::Path;
//!
//! let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/Philosophers-PT-000005.pnml");
//! let stats = Search::file(&path).config(ExploreConfig::default()).run().unwrap();
//! assert_eq!((stats.states, stats.transitions), (243, 945));
//! ```

pub mod checkpoint;
pub mod cli;
pub mod codec;
pub mod engine;
pub mod error;
pub mod files;
pub mod lts;
pub mod model;
pub mod par;
pub mod plot;
pub mod post;
pub mod run;
pub mod storage;
pub mod store;
pub mod sys;

pub use engine::{ExploreStats, Order};
pub use error::{ExploreError, LtsError, ModelError, PostError, StorageError, StoreError};
pub use model::{Fired, LabelId, Model, TransitionId};
pub use store::{Exactness, Insert, StateStore};
