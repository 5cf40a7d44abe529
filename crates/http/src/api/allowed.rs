//! The first thing every API handler takes: the caller, authenticated and allowed the route's
//! operation (on the preview its path names) before anything else of the request — its query,
//! its body — is read or looked at. `Allowed<op::Extend>` in a handler's arguments says which
//! operation; Kubernetes RBAC (or a preview token's scope) decides, with the preview's place
//! taken from the watch cache, so nothing is fetched for a caller who may not.

use std::marker::PhantomData;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::extract::{Authenticated, Failed};
use crate::AppState;
use sandcastle_agent::{AgentError, Caller, Operation};

/// An operation, as a type (`Allowed<op::Get>`).
pub trait Op {
    const OP: Operation;
}

/// The operations as types, one per route.
pub mod op {
    use super::{Op, Operation};

    macro_rules! ops {
        ($($name:ident),*) => {$(
            #[derive(Debug)]
            pub struct $name;
            impl Op for $name {
                const OP: Operation = Operation::$name;
            }
        )*};
    }

    ops!(
        List,
        Get,
        Wait,
        Events,
        Logs,
        Create,
        Redeploy,
        Stop,
        Wake,
        Extend,
        Reset,
        Delete,
        Token,
        Share,
        Unshare,
        HeaderSecret,
        RunTest,
        RefreshData
    );
}

/// The caller, allowed operation `O`.
#[derive(Debug)]
pub struct Allowed<O>(pub Caller, pub(super) PhantomData<O>);

impl<O: Op> FromRequestParts<AppState> for Allowed<O> {
    type Rejection = Failed;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Failed> {
        let Authenticated(caller) = Authenticated::from_request_parts(parts, state).await?;
        let on_one = super::route_of(O::OP).1.contains("{name}");
        let name = if on_one {
            Path::<Vec<(String, String)>>::from_request_parts(parts, state)
                .await
                .ok()
                .and_then(|Path(params)| params.into_iter().find(|(k, _)| k == "name"))
                .map(|(_, name)| name)
        } else {
            None
        };
        state.agent.permit(&caller, O::OP, name.as_deref()).await?;
        if on_one && name.is_none() {
            return Err(Failed(AgentError::invalid(
                "invalid_name",
                "name",
                "the name in the path is not UTF-8",
            )));
        }
        Ok(Self(caller, PhantomData))
    }
}
