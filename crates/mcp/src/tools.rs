//! The tool catalogue: one MCP tool per operation on previews (an exhaustive `match`, so a new
//! operation does not compile until it is offered here too), plus `diagnose_preview`; each with
//! MCP annotations and an input schema generated from the REST API's own request types. Turning
//! a call's arguments into a [`Request`] is here too. No I/O.

use std::sync::Arc;

use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use sandcastle_agent::remote::{self, Request as Api};
use sandcastle_agent::{
    CreatePreview, ExtendBody, ListFilter, LogQuery, Operation, RedeployBody, ResetBody, ShareBody,
    TokenRequestBody, WaitQuery,
};
use sandcastle_domain::quote::{clip, short};

/// One tool agents see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    ListPreviews,
    GetPreview,
    WaitForPreview,
    GetLogs,
    GetEvents,
    DiagnosePreview,
    CreatePreview,
    Redeploy,
    Extend,
    Stop,
    Wake,
    Reset,
    Destroy,
    MintPreviewToken,
    SharePreview,
    RevokeShare,
    GetHeaderSecret,
    RunTests,
    RefreshBlueprintData,
}

/// A preview, by name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Named {
    /// The preview's name.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub query: WaitQuery,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LogsArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub query: LogQuery,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateArgs {
    #[serde(flatten)]
    pub preview: CreatePreview,
    /// Makes a retried call return the preview the first one made (the same key with other
    /// arguments is refused).
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RedeployArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub body: RedeployBody,
}

/// A Blueprint, by name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlueprintArg {
    /// The Blueprint's name.
    pub blueprint: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ResetArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub body: ResetBody,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExtendArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub body: ExtendBody,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DestroyArgs {
    /// The preview's name.
    pub name: String,
    /// The confirmation the first call answered (valid for a minute). Without it, nothing is
    /// deleted: the call answers a confirmation to send back.
    pub confirm: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShareArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub body: ShareBody,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeArgs {
    /// The preview's name.
    pub name: String,
    /// The share link's id (as `get_preview` lists it).
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunTestArgs {
    /// The preview's name.
    pub name: String,
    /// One of its Blueprint's tests (`get_preview` lists them under `tests` once they ran).
    pub test: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TokenArgs {
    /// The preview's name.
    pub name: String,
    #[serde(flatten)]
    pub body: TokenRequestBody,
}

/// A call's arguments, read and checked: an operation of the API, or one of MCP's own.
#[derive(Debug)]
pub enum Request {
    Api(remote::Request),
    /// The preview, its Events and its failing workloads' logs, read together.
    Diagnose(String),
    /// The two steps of `destroy`: without a confirmation, ask for one.
    Destroy(String, Option<String>),
}

impl Tool {
    pub const ALL: [Tool; 19] = [
        Self::ListPreviews,
        Self::GetPreview,
        Self::WaitForPreview,
        Self::GetLogs,
        Self::GetEvents,
        Self::DiagnosePreview,
        Self::CreatePreview,
        Self::Redeploy,
        Self::Extend,
        Self::Stop,
        Self::Wake,
        Self::Reset,
        Self::Destroy,
        Self::MintPreviewToken,
        Self::SharePreview,
        Self::RevokeShare,
        Self::GetHeaderSecret,
        Self::RunTests,
        Self::RefreshBlueprintData,
    ];

    /// The tool offering `op`. Exhaustive: every operation is a tool.
    pub fn of(op: Operation) -> Tool {
        match op {
            Operation::List => Self::ListPreviews,
            Operation::Get => Self::GetPreview,
            Operation::Wait => Self::WaitForPreview,
            Operation::Logs => Self::GetLogs,
            Operation::Events => Self::GetEvents,
            Operation::Create => Self::CreatePreview,
            Operation::Redeploy => Self::Redeploy,
            Operation::Extend => Self::Extend,
            Operation::Stop => Self::Stop,
            Operation::Wake => Self::Wake,
            Operation::Reset => Self::Reset,
            Operation::Delete => Self::Destroy,
            Operation::Token => Self::MintPreviewToken,
            Operation::Share => Self::SharePreview,
            Operation::Unshare => Self::RevokeShare,
            Operation::HeaderSecret => Self::GetHeaderSecret,
            Operation::RunTest => Self::RunTests,
            Operation::RefreshData => Self::RefreshBlueprintData,
        }
    }

    /// The operation a call runs (a diagnosis reads the preview, its Events and logs).
    pub fn operation(self) -> Operation {
        match self {
            Self::ListPreviews => Operation::List,
            Self::GetPreview | Self::DiagnosePreview => Operation::Get,
            Self::WaitForPreview => Operation::Wait,
            Self::GetLogs => Operation::Logs,
            Self::GetEvents => Operation::Events,
            Self::CreatePreview => Operation::Create,
            Self::Redeploy => Operation::Redeploy,
            Self::Extend => Operation::Extend,
            Self::Stop => Operation::Stop,
            Self::Wake => Operation::Wake,
            Self::Reset => Operation::Reset,
            Self::Destroy => Operation::Delete,
            Self::MintPreviewToken => Operation::Token,
            Self::SharePreview => Operation::Share,
            Self::RevokeShare => Operation::Unshare,
            Self::GetHeaderSecret => Operation::HeaderSecret,
            Self::RunTests => Operation::RunTest,
            Self::RefreshBlueprintData => Operation::RefreshData,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::ListPreviews => "list_previews",
            Self::GetPreview => "get_preview",
            Self::WaitForPreview => "wait_for_preview",
            Self::GetLogs => "get_logs",
            Self::GetEvents => "get_events",
            Self::DiagnosePreview => "diagnose_preview",
            Self::CreatePreview => "create_preview",
            Self::Redeploy => "redeploy",
            Self::Extend => "extend",
            Self::Stop => "stop",
            Self::Wake => "wake",
            Self::Reset => "reset",
            Self::Destroy => "destroy",
            Self::MintPreviewToken => "mint_preview_token",
            Self::SharePreview => "share_preview",
            Self::RevokeShare => "revoke_share",
            Self::GetHeaderSecret => "get_header_secret",
            Self::RunTests => "run_tests",
            Self::RefreshBlueprintData => "refresh_blueprint_data",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn writes(self) -> bool {
        self.operation().writes()
    }

    fn description(self) -> &'static str {
        match self {
            Self::ListPreviews => {
                "List preview environments you may see, filtered by repository, pull request, branch, Blueprint or phase; Removed ones only with `removed: true`. Items leave out the history (get_preview has it)."
            }
            Self::GetPreview => {
                "One preview: phase and reason, URL, desired and deployed commit, services ready, expiry, history, links."
            }
            Self::WaitForPreview => {
                "Wait until a preview is Ready (or Failed), Stopped or Removed, or (`for: test`, `test: NAME`) until one of its tests has a result (`passed` or `failed`, with the run), or the timeout passes (default 5m). Sends progress while waiting."
            }
            Self::GetLogs => {
                "Recent logs of the preview's pods (bounded in lines and bytes), with Secret values and tokens redacted."
            }
            Self::GetEvents => "Sandcastle's Events on the preview and its namespace's Events.",
            Self::DiagnosePreview => {
                "Why a preview is not Ready: its phase and reason, the workloads not ready, warning Events and their last log lines."
            }
            Self::CreatePreview => {
                "Create a sandbox preview of a repository's branch or commit from a Blueprint, without a pull request."
            }
            Self::Redeploy => {
                "Deploy a preview again: another commit, or the same one as a new rollout."
            }
            Self::Extend => "Push a preview's expiry back (never past the Blueprint's maxTtl).",
            Self::Stop => "Scale a preview to zero, keeping its data.",
            Self::Wake => "Start a stopped preview again.",
            Self::Reset => {
                "Throw away the preview's data (volumes, StatefulSets, seed Jobs) and seed it again from the Blueprint; where the Blueprint restores snapshots of its data, restore the one the preview started from (`latest`: the newest)."
            }
            Self::Destroy => {
                "Tear a preview down. Two steps: call without `confirm` to get a confirmation (valid for a minute), then call again with it."
            }
            Self::MintPreviewToken => {
                "Mint a short-lived Kubernetes token scoped to this preview's namespace (read-only there) and to this preview in Sandcastle."
            }
            Self::SharePreview => {
                "Mint a share link: it opens a signed-in-only preview in a browser without a GitHub account until it expires (`expiresIn`, default 24h) or is revoked. The link is in this answer only."
            }
            Self::RevokeShare => {
                "Revoke a share link of a preview by its id: it opens nothing from now on."
            }
            Self::GetHeaderSecret => {
                "The preview's header secret: sent as X-Sandcastle-Preview-Secret it opens a signed-in-only preview for tools that cannot send a token."
            }
            Self::RefreshBlueprintData => {
                "Take a new snapshot of a Blueprint's data (its spec.data restores previews' volumes from snapshots): previews made from then on start from it; running ones keep theirs."
            }
            Self::RunTests => {
                "Run one of the preview's Blueprint tests now, as a Job inside the preview (once it is Ready); its result is the commit's GitHub check run `Sandcastle / <test>`. Wait for it with wait_for_preview {for: test, test}."
            }
        }
    }

    fn annotations(self) -> ToolAnnotations {
        let destructive = matches!(self, Self::Destroy | Self::Reset);
        // Repeating the call changes nothing more: reads, and writes that set a state.
        let idempotent = !self.writes()
            || matches!(
                self,
                Self::Stop | Self::Wake | Self::CreatePreview | Self::Destroy
            );
        ToolAnnotations::new()
            .read_only(!self.writes())
            .destructive(destructive)
            .idempotent(idempotent)
            .open_world(false)
    }

    fn schema(self) -> Arc<JsonObject> {
        match self {
            Self::ListPreviews => schema_for_type::<ListFilter>(),
            Self::GetPreview
            | Self::GetEvents
            | Self::DiagnosePreview
            | Self::Stop
            | Self::Wake => schema_for_type::<Named>(),
            Self::Reset => schema_for_type::<ResetArgs>(),
            Self::WaitForPreview => schema_for_type::<WaitArgs>(),
            Self::GetLogs => schema_for_type::<LogsArgs>(),
            Self::CreatePreview => schema_for_type::<CreateArgs>(),
            Self::Redeploy => schema_for_type::<RedeployArgs>(),
            Self::Extend => schema_for_type::<ExtendArgs>(),
            Self::Destroy => schema_for_type::<DestroyArgs>(),
            Self::MintPreviewToken => schema_for_type::<TokenArgs>(),
            Self::SharePreview => schema_for_type::<ShareArgs>(),
            Self::RevokeShare => schema_for_type::<RevokeArgs>(),
            Self::GetHeaderSecret => schema_for_type::<Named>(),
            Self::RunTests => schema_for_type::<RunTestArgs>(),
            Self::RefreshBlueprintData => schema_for_type::<BlueprintArg>(),
        }
    }

    /// The tool as MCP lists it.
    pub fn describe(self) -> McpTool {
        McpTool::new(self.name(), self.description(), self.schema())
            .with_annotations(self.annotations())
    }

    /// The tools offered: the reads, and the writes when they are turned on.
    pub fn offered(writes: bool) -> Vec<Tool> {
        Self::ALL
            .into_iter()
            .filter(|t| writes || !t.writes())
            .collect()
    }

    /// Read `arguments` for this tool; the error names the field at fault.
    pub fn request(self, arguments: Option<JsonObject>) -> Result<Request, String> {
        let v = Value::Object(arguments.unwrap_or_default());
        Ok(match self {
            Self::ListPreviews => Request::Api(Api::List(parse(v)?)),
            Self::GetPreview => Request::Api(Api::Get(parse::<Named>(v)?.name)),
            Self::GetEvents => Request::Api(Api::Events(parse::<Named>(v)?.name)),
            Self::DiagnosePreview => Request::Diagnose(parse::<Named>(v)?.name),
            Self::Stop => Request::Api(Api::Stop(parse::<Named>(v)?.name)),
            Self::Wake => Request::Api(Api::Wake(parse::<Named>(v)?.name)),
            Self::Reset => {
                let (name, body) = named(v)?;
                Request::Api(Api::Reset(name, body))
            }
            Self::WaitForPreview => {
                let (name, q) = named(v)?;
                Request::Api(Api::Wait(name, q))
            }
            Self::GetLogs => {
                let (name, q) = named(v)?;
                Request::Api(Api::Logs(name, q))
            }
            Self::CreatePreview => {
                let (key, preview) = split(v, "idempotencyKey")?;
                Request::Api(Api::Create(Box::new(preview), key))
            }
            Self::Redeploy => {
                let (name, body) = named(v)?;
                Request::Api(Api::Redeploy(name, body))
            }
            Self::Extend => {
                let (name, body) = named(v)?;
                Request::Api(Api::Extend(name, body))
            }
            Self::Destroy => {
                let a: DestroyArgs = parse(v)?;
                Request::Destroy(a.name, a.confirm)
            }
            Self::MintPreviewToken => {
                let (name, body) = named(v)?;
                Request::Api(Api::Token(name, body))
            }
            Self::SharePreview => {
                let (name, body) = named(v)?;
                Request::Api(Api::Share(name, body))
            }
            Self::RevokeShare => {
                let a: RevokeArgs = parse(v)?;
                Request::Api(Api::Unshare(a.name, a.id))
            }
            Self::GetHeaderSecret => Request::Api(Api::HeaderSecret(parse::<Named>(v)?.name)),
            Self::RunTests => {
                let a: RunTestArgs = parse(v)?;
                Request::Api(Api::RunTest(a.name, a.test))
            }
            Self::RefreshBlueprintData => {
                Request::Api(Api::RefreshData(parse::<BlueprintArg>(v)?.blueprint))
            }
        })
    }
}

/// `field` taken out of the arguments (a string, if present), and the rest read as `T`. (Read
/// apart rather than with `#[serde(flatten)]`, whose errors lose the field's name.)
fn split<T: DeserializeOwned>(v: Value, field: &str) -> Result<(Option<String>, T), String> {
    let Value::Object(mut map) = v else {
        return Err("the arguments must be an object".to_owned());
    };
    let taken = match map.remove(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            let other = other.to_string();
            return Err(format!("{field}: expected a string, not {}", clip(&other)));
        }
    };
    Ok((taken, parse(Value::Object(map))?))
}

/// The preview's `name` and the rest of the arguments as `T`.
fn named<T: DeserializeOwned>(v: Value) -> Result<(String, T), String> {
    match split(v, "name")? {
        (Some(name), rest) => Ok((name, rest)),
        (None, _) => Err("name: missing: the preview's name".to_owned()),
    }
}

/// `v` read as `T`; the error names the field and quotes no value at length.
fn parse<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let why = e.inner().to_string();
        if path == "." {
            clip(&why).into_owned()
        } else {
            format!("{}: {}", short(&path), clip(&why))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Option<JsonObject> {
        v.as_object().cloned()
    }

    #[test]
    fn every_operation_is_a_tool_and_back() {
        for op in Operation::ALL {
            assert_eq!(Tool::of(op).operation(), op, "{op:?}");
        }
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
    }

    #[test]
    fn writes_are_offered_only_when_turned_on() {
        let names =
            |writes| -> Vec<&str> { Tool::offered(writes).into_iter().map(Tool::name).collect() };
        assert_eq!(
            names(false),
            [
                "list_previews",
                "get_preview",
                "wait_for_preview",
                "get_logs",
                "get_events",
                "diagnose_preview"
            ]
        );
        assert_eq!(names(true).len(), 19);
    }

    #[test]
    fn annotations_say_what_a_tool_does() {
        let a = Tool::GetLogs.describe().annotations.unwrap();
        assert_eq!(
            (a.read_only_hint, a.destructive_hint),
            (Some(true), Some(false))
        );
        let a = Tool::Destroy.describe().annotations.unwrap();
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint),
            (Some(false), Some(true), Some(true))
        );
        let a = Tool::Extend.describe().annotations.unwrap();
        assert_eq!(a.idempotent_hint, Some(false));
    }

    #[test]
    fn schemas_come_from_the_api_types() {
        let s = Tool::CreatePreview.describe().input_schema;
        let props = s["properties"].as_object().unwrap();
        for field in [
            "blueprint",
            "repository",
            "branch",
            "commit",
            "ttl",
            "idempotencyKey",
        ] {
            assert!(props.contains_key(field), "{field} in {s:?}");
        }
        assert_eq!(s["type"], "object");
        let s = Tool::GetLogs.describe().input_schema;
        assert!(s["properties"]["tailLines"].is_object(), "{s:?}");
    }

    #[test]
    fn arguments_are_read_with_the_field_at_fault_named() {
        let r = Tool::CreatePreview
            .request(args(json!({"blueprint": "shop", "repository": "acme/shop",
                "branch": "main", "idempotencyKey": "k1"})))
            .unwrap();
        assert!(
            matches!(&r, Request::Api(Api::Create(p, Some(k))) if p.blueprint == "shop" && k == "k1"),
            "{r:?}"
        );
        let e = Tool::GetLogs
            .request(args(json!({"name": "p", "tailLines": "ten"})))
            .unwrap_err();
        assert!(e.contains("tailLines"), "{e}");
        let e = Tool::GetPreview.request(None).unwrap_err();
        assert!(e.contains("name"), "{e}");
        let e = Tool::Stop
            .request(args(json!({"name": "p", "force": true})))
            .unwrap_err();
        assert!(e.contains("force"), "{e}");
        let r = Tool::WaitForPreview
            .request(args(
                json!({"name": "p", "for": "stopped", "timeout": "30s"}),
            ))
            .unwrap();
        assert!(
            matches!(r, Request::Api(Api::Wait(n, q)) if n == "p" && q.timeout.as_deref() == Some("30s"))
        );
        let r = Tool::WaitForPreview
            .request(args(json!({"name": "p", "for": "test", "test": "smoke"})))
            .unwrap();
        assert!(matches!(r, Request::Api(Api::Wait(_, q)) if q.test.as_deref() == Some("smoke")));
        let r = Tool::RunTests
            .request(args(json!({"name": "p", "test": "smoke"})))
            .unwrap();
        assert!(matches!(r, Request::Api(Api::RunTest(n, t)) if n == "p" && t == "smoke"));
        let e = Tool::RunTests
            .request(args(json!({"name": "p"})))
            .unwrap_err();
        assert!(e.contains("test"), "{e}");
    }
}
