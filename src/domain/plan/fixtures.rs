//! Snapshot tests of `plan()` over the blueprints in `fixtures/blueprints/`.
