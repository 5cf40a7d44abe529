//! The `audit` log lines Sandcastle writes during the tests, captured as JSON-like maps of
//! their fields (whatever the test log filter), so tests can check that every write is audited.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// One audit line: its fields by name, and its message under `message`.
pub type Line = BTreeMap<String, String>;

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());

/// Every audit line written so far in this test process.
pub fn lines() -> Vec<Line> {
    LINES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The captures `target: "audit"` events.
pub struct Capture;

struct Fields(Line);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .map_or(text.clone(), str::to_owned);
        self.0.insert(field.name().to_owned(), text);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "audit" {
            return;
        }
        let mut fields = Fields(Line::new());
        event.record(&mut fields);
        LINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fields.0);
    }
}
