//! Unit tests of the Δ store: reconstitution, backward firing, predecessor update.
