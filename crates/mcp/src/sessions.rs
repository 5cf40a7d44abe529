//! MCP sessions over Streamable HTTP, bounded: each caller (by Kubernetes identity) may hold
//! [`SessionLimits::per_caller`] open at once and the server [`SessionLimits::overall`], so a
//! client that never closes its sessions (or a token used to open thousands) costs a bounded
//! amount of memory. The [`Ledger`] knows which session is whose; [`Sessions`] is rmcp's own
//! in-memory session manager, telling the ledger when a session opens and ends (its `DELETE`,
//! or five minutes unused). The ledger's rules are pure and tested here; `http` asks it before
//! a new session is made and answers 429 when one is full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use sandcastle_agent::AgentError;

/// How many sessions may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub per_caller: usize,
    pub overall: usize,
}

impl Default for SessionLimits {
    /// 20 for one caller (agents sharing a token each hold one), 500 in all (about 20 MB).
    fn default() -> Self {
        Self {
            per_caller: 20,
            overall: 500,
        }
    }
}

/// How long an unused session lives (rmcp's keep-alive).
pub const IDLE_MINUTES: u64 = 5;

/// Who holds a session: a caller's cluster and user name.
pub type Holder = String;

#[derive(Debug, Default)]
struct State {
    /// Open sessions, and who holds each (none yet while its `initialize` is answered).
    open: HashMap<String, Option<Holder>>,
    /// Sessions held or being opened, by holder.
    held: HashMap<Holder, usize>,
    /// Sessions being opened, not yet in `open`.
    opening: usize,
}

/// Which session is whose, and how many each holds.
#[derive(Debug)]
pub struct Ledger {
    limits: SessionLimits,
    state: Mutex<State>,
}

/// A place taken for a session being opened: given back when dropped unless the session came
/// to be ([`Reservation::bind`]).
#[derive(Debug)]
pub struct Reservation {
    ledger: Arc<Ledger>,
    holder: Holder,
    bound: bool,
}

impl Ledger {
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            limits,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new session of `holder` (named `who` in the refusal), or why there is none.
    pub fn reserve(self: &Arc<Self>, holder: &str, who: &str) -> Result<Reservation, AgentError> {
        let mut s = self.state();
        let held = s.held.get(holder).copied().unwrap_or(0);
        if held >= self.limits.per_caller {
            return Err(AgentError::TooMany {
                code: "too_many_sessions",
                message: format!(
                    "{who} has {held} MCP sessions open, the most one caller may have; end one it no longer uses with DELETE /mcp and its Mcp-Session-Id header (clients do when they close), or wait: a session unused for {IDLE_MINUTES} minutes ends by itself"
                ),
            });
        }
        if s.open.len() + s.opening >= self.limits.overall {
            return Err(AgentError::TooMany {
                code: "too_many_sessions",
                message: format!(
                    "this server has {} MCP sessions open, the most it keeps; try again in a few minutes (a session unused for {IDLE_MINUTES} minutes ends by itself)",
                    self.limits.overall
                ),
            });
        }
        *s.held.entry(holder.to_owned()).or_default() += 1;
        s.opening += 1;
        Ok(Reservation {
            ledger: Arc::clone(self),
            holder: holder.to_owned(),
            bound: false,
        })
    }

    /// Session `id` was made (before its holder is known).
    fn opened(&self, id: &str) {
        self.state().open.entry(id.to_owned()).or_insert(None);
    }

    /// Session `id` ended: its holder's place is free.
    fn closed(&self, id: &str) {
        let mut s = self.state();
        if let Some(Some(holder)) = s.open.remove(id) {
            release(&mut s, &holder);
        }
    }

    /// Who holds session `id`: `None` for a session this ledger does not know (ended, or
    /// never made), `Some(None)` while it is being opened.
    pub fn holder(&self, id: &str) -> Option<Option<Holder>> {
        self.state().open.get(id).cloned()
    }

    /// Sessions open, and held by `holder`.
    #[cfg(test)]
    fn count(&self, holder: &str) -> (usize, usize) {
        let s = self.state();
        (s.open.len(), s.held.get(holder).copied().unwrap_or(0))
    }
}

fn release(s: &mut State, holder: &str) {
    if let Some(n) = s.held.get_mut(holder) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            s.held.remove(holder);
        }
    }
}

impl Reservation {
    /// The session `id` came of it: it is the holder's until it ends.
    pub fn bind(mut self, id: &str) {
        let mut s = self.ledger.state();
        s.opening = s.opening.saturating_sub(1);
        self.bound = true;
        match s.open.get_mut(id) {
            Some(holder @ None) => *holder = Some(self.holder.clone()),
            // Ended already (or unknown): nothing is held.
            _ => release(&mut s, &self.holder),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.bound {
            let mut s = self.ledger.state();
            s.opening = s.opening.saturating_sub(1);
            release(&mut s, &self.holder);
        }
    }
}

/// rmcp's in-memory sessions, reporting to the [`Ledger`] when one opens and ends.
#[derive(Debug)]
pub struct Sessions {
    inner: LocalSessionManager,
    ledger: Arc<Ledger>,
}

impl Sessions {
    pub fn new(ledger: Arc<Ledger>) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            ledger,
        }
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.ledger.opened(&id);
        Ok((id, transport))
    }

    fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<ServerJsonRpcMessage, Self::Error>> + Send {
        self.inner.initialize_session(id, message)
    }

    fn has_session(
        &self,
        id: &SessionId,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send {
        self.inner.has_session(id)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.ledger.closed(id);
        self.inner.close_session(id).await
    }

    fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_stream(id, message)
    }

    fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.accept_message(id, message)
    }

    fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_standalone_stream(id)
    }

    fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.resume(id, last_event_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(per_caller: usize, overall: usize) -> Arc<Ledger> {
        Arc::new(Ledger::new(SessionLimits {
            per_caller,
            overall,
        }))
    }

    fn open(l: &Arc<Ledger>, holder: &str, id: &str) {
        let r = l.reserve(holder, holder).unwrap();
        l.opened(id);
        r.bind(id);
    }

    #[test]
    fn each_caller_holds_at_most_its_share_and_an_ended_session_frees_it() {
        let l = ledger(2, 10);
        open(&l, "alice", "a1");
        open(&l, "alice", "a2");
        let full = l.reserve("alice", "alice").unwrap_err();
        assert_eq!(
            (full.code(), full.status().as_u16()),
            ("too_many_sessions", 429)
        );
        let message = full.to_string();
        assert!(
            message.contains("alice has 2 MCP sessions open")
                && message.contains("DELETE /mcp")
                && message.contains("Mcp-Session-Id"),
            "{message}"
        );
        open(&l, "bob", "b1");
        assert_eq!(l.holder("a1"), Some(Some("alice".to_owned())));
        assert_eq!(l.holder("nope"), None);
        l.closed("a1");
        l.closed("a1");
        assert_eq!(l.count("alice"), (2, 1));
        open(&l, "alice", "a3");
        assert_eq!(l.count("alice"), (3, 2));
    }

    #[test]
    fn the_server_holds_at_most_its_bound_counting_those_being_opened() {
        let l = ledger(5, 3);
        open(&l, "alice", "a1");
        let pending = l.reserve("bob", "bob").unwrap();
        open(&l, "carol", "c1");
        let full = l.reserve("dave", "dave").unwrap_err();
        assert!(full.to_string().contains("this server has 3"), "{full}");
        // A session that did not come to be gives its place back.
        drop(pending);
        assert_eq!(l.count("bob"), (2, 0));
        open(&l, "dave", "d1");
        assert_eq!(l.count("dave"), (3, 1));
    }

    #[test]
    fn a_session_that_ended_before_it_was_bound_holds_nothing() {
        let l = ledger(1, 10);
        let r = l.reserve("alice", "alice").unwrap();
        l.opened("a1");
        l.closed("a1");
        r.bind("a1");
        assert_eq!(l.count("alice"), (0, 0));
        assert!(l.reserve("alice", "alice").is_ok());
    }
}
