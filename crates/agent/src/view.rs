//! A preview as the API, MCP and CLI show it — phase and why, URL, desired and deployed commit,
//! services, expiry, place in the queue, history, links — and the list filters. Pure: built from
//! the PreviewEnvironment and Sandcastle's public addresses.

use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AgentError;
use kube::ResourceExt;
use sandcastle_crd::labels::SANDBOX;
use sandcastle_crd::{Phase, PreviewEnvironment, SlotState};
use sandcastle_domain::quote::short;
use sandcastle_domain::{NamespaceName, naming};

/// One preview environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewView {
    /// The PreviewEnvironment's name.
    pub name: String,
    pub blueprint: String,
    /// `owner/name`.
    pub repository: String,
    /// The pull request, for a pull request's preview; none for a sandbox.
    pub pull_request: Option<u64>,
    /// The branch (head ref) previewed.
    pub branch: String,
    /// `Pending` until the controller first looked.
    pub phase: Phase,
    /// One sentence: what is happening, or what went wrong.
    pub reason: Option<String>,
    /// What the rollout is stuck on, when the cluster says (unschedulable pods, an image that
    /// cannot be pulled).
    pub stuck_on: Option<String>,
    /// While an event of its pull request waits for GitHub (the repository's configuration, the
    /// changed files): what it waits for. Sandcastle asks again until GitHub answers.
    pub waiting_for_github: Option<String>,
    /// While deploying or failed: why it is not Ready, classified, with the failing
    /// container's last log lines (redacted).
    pub diagnosis: Option<sandcastle_crd::Diagnosis>,
    pub url: Option<String>,
    pub commit: Commits,
    pub services: Vec<ServiceView>,
    /// Services with every replica ready, and all services.
    pub services_ready: u32,
    pub services_total: u32,
    /// RFC 3339.
    pub expires_at: Option<String>,
    /// Place in line (1 = next) while waiting for a free slot under the Blueprint's cap, or
    /// to start a rollout (`--max-concurrent-rollouts`).
    pub queue_position: Option<u32>,
    pub stopped: bool,
    /// Seconds its workloads ran in the stretches that ended (stopped, torn down).
    pub running_seconds: u64,
    /// RFC 3339: when the stretch under way began, absent while it does not run; the running
    /// time so far is `runningSeconds` plus the time since then (environment-hours × 3600).
    pub running_since: Option<String>,
    /// Made through the API without a pull request.
    pub sandbox: bool,
    /// A preview of its Blueprint's warm pool (`pool`), made ahead of time for a sandbox or a
    /// pull request to take over; its environment-hours are the pool's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pool: bool,
    /// The preview namespace.
    pub namespace: String,
    /// The cluster it lives in (`in-cluster`: Sandcastle's own); absent while it waits to be
    /// placed.
    pub cluster: Option<String>,
    pub requested_by: String,
    pub created_at: Option<String>,
    /// The last actions on the preview, oldest first; left out of lists (get the preview).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryView>,
    /// Its live share links (the links themselves were shown once, to whoever minted them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<ShareListed>,
    /// The last run of each of the Blueprint's tests (each the commit's check run
    /// `Sandcastle / <name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<super::TestRunView>,
    /// Where its data stores started from, when its Blueprint restores snapshots (`spec.data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataView>,
    pub links: Links,
}

/// Which snapshot of the Blueprint's data a preview's claims were restored from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataView {
    /// The snapshot set (`20261207-031500`); absent when the preview started empty.
    pub snapshot: Option<String>,
    /// RFC 3339: when that snapshot was taken (its age is now minus this).
    pub taken_at: Option<String>,
    /// The claims restored from it.
    pub claims: Vec<String>,
    /// Why the preview started empty where its Blueprint restores snapshots.
    pub note: Option<String>,
}

fn data_view(data: &sandcastle_crd::PreviewData) -> DataView {
    DataView {
        snapshot: data.snapshot.clone(),
        taken_at: data.taken_at.as_ref().map(|t| t.0.to_string()),
        claims: data.claims.clone(),
        note: data.note.clone(),
    }
}

/// A share link of a preview, as listed: everything but the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareListed {
    pub id: String,
    pub label: Option<String>,
    pub created_by: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Commits {
    /// The commit asked for.
    pub desired: String,
    /// The commit running (Ready), if any.
    pub deployed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ServiceView {
    pub name: String,
    pub kind: String,
    pub ready: i32,
    pub desired: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    /// RFC 3339.
    pub time: String,
    pub actor: String,
    pub action: String,
    pub commit: Option<String>,
    pub result: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Links {
    /// This preview in the API.
    #[serde(rename = "self")]
    pub self_: String,
    /// Sandcastle's page for it (GitHub's `log_url`).
    pub page: String,
    pub pull_request: Option<String>,
    /// The GitHub deployment of the current commit, in GitHub's API.
    pub deployment: Option<String>,
}

/// A page of previews.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewList {
    pub items: Vec<PreviewView>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue")]
    pub next: Option<String>,
}

/// Which previews to list.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, IntoParams, ToSchema, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListFilter {
    /// `owner/name`.
    pub repo: Option<String>,
    /// A pull request number.
    #[param(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    #[schema(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    pub pr: Option<u32>,
    pub branch: Option<String>,
    pub blueprint: Option<String>,
    pub phase: Option<Phase>,
    /// List Removed previews (tombstones) too; without it they are left out, unless `phase`
    /// asks for them.
    pub removed: Option<bool>,
    /// At most this many (1 to 500; default 50).
    #[param(value_type = Option<u64>, minimum = 1, maximum = 500)]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// From a previous page's `continue` (the name of the page's last preview); empty: the
    /// first page.
    #[serde(rename = "continue")]
    #[param(
        rename = "continue",
        pattern = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*)?$",
        max_length = 253
    )]
    #[schema(
        pattern = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*)?$",
        max_length = 253
    )]
    #[schemars(
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*)?$"
        ),
        length(max = 253)
    )]
    pub after: Option<String>,
}

/// The most previews one page holds.
pub const PAGE_MAX: u32 = 500;

/// The page size `filter` asks for (50 unless it says), or why it cannot be honoured: a
/// `limit` outside 1..=500, or a `continue` no page ever answered (not a preview's name).
pub fn page_size(filter: &ListFilter) -> Result<usize, AgentError> {
    let limit = filter.limit.unwrap_or(50);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(AgentError::invalid(
            "invalid_query",
            "limit",
            format!("a page holds 1 to {PAGE_MAX} previews, not {limit}"),
        ));
    }
    if let Some(after) = filter.after.as_ref().filter(|a| !a.is_empty())
        && !naming::is_object_name(after)
    {
        return Err(AgentError::invalid(
            "invalid_query",
            "continue",
            format!(
                "{:?} is not a page this API answered: pass a page's `continue` as it came",
                short(after)
            ),
        ));
    }
    Ok(limit as usize)
}

/// Where links point: Sandcastle's public address and GitHub's API and web addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    pub public_url: String,
    pub github_api: String,
    pub github_web: String,
    pub namespace_prefix: String,
}

impl Addresses {
    /// GitHub's web address for its API address (`https://api.github.com` → `https://github.com`,
    /// Enterprise `https://HOST/api/v3` → `https://HOST`).
    pub fn web_of(api: &str) -> String {
        let api = api.trim_end_matches('/');
        if let Some(host) = api.strip_suffix("/api/v3") {
            return host.to_owned();
        }
        api.replace("://api.", "://")
    }
}

fn phase_of(pe: &PreviewEnvironment) -> Phase {
    pe.status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(Phase::Pending)
}

/// The cluster `pe` lives in, or would (Sandcastle's own while not placed).
pub fn cluster_of(pe: &PreviewEnvironment) -> &str {
    pe.status
        .as_ref()
        .and_then(sandcastle_domain::placement::placed_in)
        .unwrap_or(sandcastle_crd::IN_CLUSTER)
}

/// The preview namespace of `pe`, as the controller names it.
pub fn namespace_of(pe: &PreviewEnvironment, prefix: &str) -> String {
    if let Some(ns) = pe.status.as_ref().and_then(|s| s.namespace.clone()) {
        return ns;
    }
    if let Some(a) = &pe.spec.adopts {
        return a.namespace.clone();
    }
    NamespaceName::new(&pe.name_any()).map_or_else(
        |_| pe.name_any(),
        |n| naming::namespace_name(prefix, &n).to_string(),
    )
}

/// The places in the line to start a rollout (1: next), by preview name, among `all` the
/// previews: those waiting that were asked for earlier go first.
pub fn line_places(all: &[Arc<PreviewEnvironment>]) -> HashMap<String, u32> {
    let mut waiting: Vec<(i64, String)> = all
        .iter()
        .filter_map(|p| {
            let st = p.status.as_ref()?;
            let line = st
                .in_line
                .as_ref()
                .filter(|_| st.phase == Some(Phase::Pending))?;
            Some((line.asked_ns, p.name_any()))
        })
        .collect();
    waiting.sort_unstable();
    waiting
        .into_iter()
        .zip(1..)
        .map(|((_, name), place)| (name, place))
        .collect()
}

/// `pe` as the API shows it.
pub fn view(pe: &PreviewEnvironment, at: &Addresses) -> PreviewView {
    let st = pe.status.clone().unwrap_or_default();
    let name = pe.name_any();
    let ready = st.services.iter().filter(|s| s.ready >= s.desired).count();
    let total = st.services.len();
    let queue_position = st
        .slot
        .as_ref()
        .filter(|s| s.state == SlotState::Queued)
        .and_then(|s| s.position);
    let public = at.public_url.trim_end_matches('/');
    PreviewView {
        blueprint: pe.spec.blueprint.clone(),
        repository: pe.spec.repository.clone(),
        pull_request: pe.spec.pull_request,
        branch: pe.spec.git_ref.clone(),
        phase: st.phase.unwrap_or(Phase::Pending),
        reason: st.message.clone(),
        stuck_on: st.stuck_on.clone(),
        waiting_for_github: pe
            .annotations()
            .get(sandcastle_crd::labels::WAITING_FOR_GITHUB)
            .cloned(),
        diagnosis: st.diagnosis.clone(),
        url: st.url.clone(),
        commit: Commits {
            desired: pe.spec.sha.clone(),
            deployed: st.deployed_sha.clone(),
        },
        services: st
            .services
            .iter()
            .map(|s| ServiceView {
                name: s.name.clone(),
                kind: s.kind.clone(),
                ready: s.ready,
                desired: s.desired,
            })
            .collect(),
        services_ready: u32::try_from(ready).unwrap_or(u32::MAX),
        services_total: u32::try_from(total).unwrap_or(u32::MAX),
        expires_at: pe.spec.expires_at.as_ref().map(|t| t.0.to_string()),
        queue_position,
        stopped: pe.spec.stopped,
        running_seconds: st.running.as_ref().map_or(0, |r| r.seconds),
        running_since: st
            .running
            .as_ref()
            .and_then(|r| r.since.as_ref())
            .map(|t| t.0.to_string()),
        sandbox: pe.labels().get(SANDBOX).is_some_and(|v| v == "true"),
        pool: sandcastle_domain::pool::is_member(pe),
        namespace: namespace_of(pe, &at.namespace_prefix),
        cluster: sandcastle_domain::placement::placed_in(&st).map(str::to_owned),
        requested_by: pe.spec.requested_by.name.clone(),
        created_at: pe.creation_timestamp().map(|t| t.0.to_string()),
        history: st
            .history
            .iter()
            .map(|h| HistoryView {
                time: h.time.0.to_string(),
                actor: h.actor.clone(),
                action: h.action.clone(),
                commit: h.sha.clone(),
                result: h.result.clone(),
            })
            .collect(),
        shares: pe
            .spec
            .shares
            .iter()
            .map(|s| ShareListed {
                id: s.id.clone(),
                label: s.label.clone(),
                created_by: s.created_by.clone(),
                created_at: s.created_at.0.to_string(),
                expires_at: s.expires_at.0.to_string(),
            })
            .collect(),
        tests: super::test_runs::views(&st),
        data: st.data.as_ref().map(data_view),
        links: Links {
            self_: format!("{public}/api/v1/previews/{name}"),
            page: format!("{public}/previews/{name}"),
            pull_request: pe
                .spec
                .pull_request
                .map(|n| format!("{}/{}/pull/{n}", at.github_web, pe.spec.repository)),
            deployment: st.github_deployment_id.map(|id| {
                format!(
                    "{}/repos/{}/deployments/{id}",
                    at.github_api.trim_end_matches('/'),
                    pe.spec.repository
                )
            }),
        },
        name,
    }
}

/// `pe` as a list shows it: without its history and share links.
pub fn list_view(pe: &PreviewEnvironment, at: &Addresses) -> PreviewView {
    let mut v = view(pe, at);
    v.history = Vec::new();
    v.shares = Vec::new();
    v
}

/// Whether `pe` passes `filter` (a Removed preview only when asked for).
pub fn matches(pe: &PreviewEnvironment, filter: &ListFilter) -> bool {
    let removed_asked = filter.removed == Some(true) || filter.phase == Some(Phase::Removed);
    (removed_asked || phase_of(pe) != Phase::Removed)
        && filter
            .repo
            .as_ref()
            .is_none_or(|r| r.eq_ignore_ascii_case(&pe.spec.repository))
        && filter
            .pr
            .is_none_or(|n| pe.spec.pull_request == Some(u64::from(n)))
        && filter.branch.as_ref().is_none_or(|b| *b == pe.spec.git_ref)
        && filter
            .blueprint
            .as_ref()
            .is_none_or(|b| *b == pe.spec.blueprint)
        && filter.phase.is_none_or(|p| p == phase_of(pe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_crd::{PreviewStatus, ServiceStatus};

    fn pe() -> PreviewEnvironment {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "shop-pr-42", "namespace": "sandcastle"},
            "spec": {
                "blueprint": "shop", "repository": "acme/shop", "pullRequest": 42, "ref": "feature",
                "sha": "abc1234def5678abc1234def5678abc1234def56",
                "requestedBy": {"kind": "github-user", "name": "octocat"},
                "expiresAt": "2026-11-30T12:00:00Z",
            },
        }))
        .unwrap();
        pe.status = Some(PreviewStatus {
            phase: Some(Phase::Ready),
            message: Some("2/2 services ready".into()),
            url: Some("http://42-shop.example.com".into()),
            github_deployment_id: Some(7),
            services: vec![
                ServiceStatus {
                    name: "web".into(),
                    kind: "Deployment".into(),
                    ready: 1,
                    desired: 1,
                },
                ServiceStatus {
                    name: "db".into(),
                    kind: "StatefulSet".into(),
                    ready: 0,
                    desired: 1,
                },
            ],
            ..PreviewStatus::default()
        });
        pe
    }

    fn addresses() -> Addresses {
        Addresses {
            public_url: "https://sandcastle.example.com/".into(),
            github_api: "https://api.github.com".into(),
            github_web: Addresses::web_of("https://api.github.com"),
            namespace_prefix: String::new(),
        }
    }

    #[test]
    fn a_preview_as_the_api_shows_it() {
        let v = view(&pe(), &addresses());
        assert_eq!(v.phase, Phase::Ready);
        assert_eq!((v.services_ready, v.services_total), (1, 2));
        assert_eq!(v.namespace, "shop-pr-42");
        assert_eq!(
            v.links.self_,
            "https://sandcastle.example.com/api/v1/previews/shop-pr-42"
        );
        assert_eq!(
            v.links.pull_request.as_deref(),
            Some("https://github.com/acme/shop/pull/42")
        );
        assert_eq!(
            v.links.deployment.as_deref(),
            Some("https://api.github.com/repos/acme/shop/deployments/7")
        );
        assert!(!v.sandbox);
        assert_eq!(
            Addresses::web_of("https://git.example.com/api/v3"),
            "https://git.example.com"
        );
    }

    #[test]
    fn filters_select_by_every_field() {
        let p = pe();
        assert!(matches(&p, &ListFilter::default()));
        let by = |f: ListFilter| matches(&p, &f);
        assert!(by(ListFilter {
            repo: Some("ACME/shop".into()),
            ..Default::default()
        }));
        assert!(!by(ListFilter {
            repo: Some("acme/web".into()),
            ..Default::default()
        }));
        assert!(by(ListFilter {
            pr: Some(42),
            ..Default::default()
        }));
        assert!(!by(ListFilter {
            pr: Some(1),
            ..Default::default()
        }));
        assert!(by(ListFilter {
            phase: Some(Phase::Ready),
            ..Default::default()
        }));
        assert!(!by(ListFilter {
            phase: Some(Phase::Failed),
            ..Default::default()
        }));
        assert!(!by(ListFilter {
            branch: Some("main".into()),
            ..Default::default()
        }));
        assert!(by(ListFilter {
            blueprint: Some("shop".into()),
            ..Default::default()
        }));
    }

    #[test]
    fn removed_previews_are_listed_only_when_asked_for() {
        let mut gone = pe();
        gone.status.as_mut().unwrap().phase = Some(Phase::Removed);
        assert!(!matches(&gone, &ListFilter::default()));
        assert!(matches(
            &gone,
            &ListFilter {
                removed: Some(true),
                ..Default::default()
            }
        ));
        assert!(matches(
            &gone,
            &ListFilter {
                phase: Some(Phase::Removed),
                ..Default::default()
            }
        ));
        assert!(!matches(
            &pe(),
            &ListFilter {
                phase: Some(Phase::Removed),
                ..Default::default()
            }
        ));
    }

    #[test]
    fn lists_leave_history_out_and_a_page_is_what_can_be_honoured() {
        let mut p = pe();
        p.status.as_mut().unwrap().history = vec![sandcastle_crd::HistoryEntry {
            time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            actor: "octocat".into(),
            action: "pull-request-opened".into(),
            sha: None,
            result: None,
        }];
        assert_eq!(view(&p, &addresses()).history.len(), 1);
        let listed = serde_json::to_value(list_view(&p, &addresses())).unwrap();
        assert!(listed.get("history").is_none(), "{listed}");
        let page = |limit: Option<u32>, after: Option<&str>| {
            page_size(&ListFilter {
                limit,
                after: after.map(str::to_owned),
                ..Default::default()
            })
        };
        assert_eq!(page(None, None), Ok(50));
        assert_eq!(page(Some(500), Some("shop-pr-1")), Ok(500));
        for (limit, after, field) in [
            (Some(0), None, "limit"),
            (Some(100_000), None, "limit"),
            (None, Some("no such page!"), "continue"),
        ] {
            let e = page(limit, after).unwrap_err();
            assert_eq!((e.code(), e.field()), ("invalid_query", Some(field)));
        }
    }
    #[test]
    fn the_place_in_the_rollout_line_counts_those_asked_for_earlier() {
        let waiting = |name: &str, asked_ns: i64, phase: Phase| {
            let mut p = pe();
            p.metadata.name = Some(name.into());
            let st = p.status.get_or_insert_default();
            st.phase = Some(phase);
            st.in_line = Some(sandcastle_crd::InLine { asked_ns });
            Arc::new(p)
        };
        let all = vec![
            waiting("c", 30, Phase::Pending),
            waiting("a", 10, Phase::Pending),
            waiting("b", 20, Phase::Pending),
            // Rolling out already: its old mark counts for nothing.
            waiting("z", 5, Phase::Deploying),
        ];
        let places = line_places(&all);
        let got: Vec<Option<u32>> = ["c", "a", "b", "z"]
            .iter()
            .map(|n| places.get(*n).copied())
            .collect();
        assert_eq!(got, [Some(3), Some(1), Some(2), None]);
    }
}
