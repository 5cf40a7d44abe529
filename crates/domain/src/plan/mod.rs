//! The clone plan: which objects of a blueprint a preview gets, changed how, applied in which
//! order. Pure (no I/O): the same objects, Blueprint and preview always give the same plan.
//!
//! The input is a list of objects, either read back from a live namespace (with everything the
//! API server adds) or parsed from manifests ([`parse_manifests`]). Its source namespace is
//! found first ([`namespaces`]). Each object is, in order: identified (a Helm hook Job given the
//! phase its hook means, [`helm`]), left out ([`select`]) or
//! refused ([`refuse`], [`security`]), stripped of what the server owns ([`strip`]), rewritten
//! for the preview ([`rewrite`], [`hosts`], [`routes`], [`images`], [`pods`]), and sorted into phases
//! ([`order`]); a plan that would run nothing is refused ([`runnable`]). `docs/cloning.md`
//! states the rules for users.

mod data;
mod edge;
mod env;
mod helm;
mod hosts;
mod images;
mod kinds;
mod limits;
mod manifests;
mod namespaces;
mod order;
mod pods;
mod refuse;
mod rewrite;
mod routes;
mod runnable;
mod security;
mod select;
mod strip;
mod test_job;
mod yaml;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::guardrails;
pub use crate::preview::{ENV_CONFIG_MAP, PreviewContext, Problem, preview_labels};
use sandcastle_crd::BlueprintSpec;

pub use images::ImageRef;
pub use manifests::{ManifestError, ManifestWarning, Manifests, parse_manifests};
pub use test_job::{TOKEN_FILE, test_job};

/// The stages a preview is applied in (the "phases" of docs/cloning.md; `Stage` in the code, so
/// that it is never confused with a preview's `crd::Phase`). Each waits for the previous one to
/// be ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// ConfigMaps (with `sandcastle-env`), Secrets, ServiceAccounts, Roles, RoleBindings,
    /// PersistentVolumeClaims, NetworkPolicies and Services. Services come this early so that
    /// their DNS names exist before the data tier starts: a database or a seed job that resolves
    /// a peer at start-up finds it.
    Config,
    /// StatefulSets (databases, queues), waited on until ready.
    Data,
    /// Jobs annotated `sandcastle.dev/hook: seed`, waited on until complete.
    Seed,
    /// Deployments, ReplicaSets, CronJobs, other Jobs, HorizontalPodAutoscalers,
    /// PodDisruptionBudgets and objects of the Blueprint's `allowKinds`.
    Apps,
    /// Ingresses and Gateway API routes (HTTPRoutes, GRPCRoutes), last, so that the URL
    /// answers only when something serves it.
    Ingress,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Config,
        Stage::Data,
        Stage::Seed,
        Stage::Apps,
        Stage::Ingress,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Config => "config",
            Stage::Data => "data",
            Stage::Seed => "seed",
            Stage::Apps => "apps",
            Stage::Ingress => "ingress",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The objects of one phase, in apply order.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub stage: Stage,
    pub objects: Vec<Value>,
}

/// An object of the blueprint that the preview does not get, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LeftOut {
    pub kind: String,
    pub name: String,
    pub reason: String,
}

/// Everything a preview gets, ready for server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// In apply order; phases without objects are omitted.
    pub steps: Vec<Step>,
    /// Jobs annotated `sandcastle.dev/hook: pre-delete`: run before teardown, not applied with
    /// the rest.
    pub pre_delete: Vec<Value>,
    /// The preview URL, when an Ingress or an HTTPRoute gives one.
    pub url: Option<String>,
    /// Objects not copied and why, sorted by kind and name.
    pub left_out: Vec<LeftOut>,
}

impl Plan {
    /// Every object to apply, in order.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.steps.iter().flat_map(|s| s.objects.iter())
    }

    /// The Service and port behind the preview URL, for probing it directly.
    pub fn backend(&self) -> Option<(String, u16)> {
        let objects: Vec<&Value> = self.objects().collect();
        hosts::backend_of(objects.into_iter(), self.url.as_deref()?)
    }

    /// The plan as people read it (`sandcastle render`): a comment header with the URL and what
    /// was left out, then one YAML document per object, each phase introduced by a comment.
    pub fn to_yaml(&self) -> Result<String, serde_saphyr::SerializeError> {
        order::to_yaml(self)
    }
}

/// The blueprint cannot be cloned. Holds every problem found, not only the first, sorted:
/// problems of the Blueprint itself first, then by kind and name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refused {
    pub problems: Vec<Problem>,
}

impl Refused {
    /// The first problem: what a one-line status (a PR comment, a deployment status) shows.
    pub fn first(&self) -> Option<&Problem> {
        self.problems.first()
    }
}

/// One problem per line, first one first.
impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// An input object with its identity parsed out.
#[derive(Debug, Clone)]
pub(crate) struct Obj {
    /// API group (`""` for the core group).
    pub group: String,
    pub kind: String,
    pub name: String,
    pub value: Value,
}

impl Obj {
    pub(crate) fn problem(&self, field: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem::field(&self.kind, &self.name, field, reason)
    }
}

/// Plan the preview of `objects` cloned from `blueprint` for `ctx`. Fails with every problem
/// found when any object (or the Blueprint itself) cannot be cloned.
pub fn plan(
    objects: &[Value],
    blueprint: &BlueprintSpec,
    ctx: &PreviewContext,
) -> Result<Plan, Refused> {
    let mut problems = Vec::new();
    let host_template = hosts::HostTemplate::new(blueprint, ctx, &mut problems);
    let tags = images::render_tags(blueprint, ctx, &mut problems);
    problems.extend(guardrails::egress::check(
        &blueprint.isolation,
        &ctx.blueprint,
    ));

    let source = namespaces::source(ctx.source_namespace.as_deref(), objects);
    let own_labels = namespaces::labels(objects, &source, blueprint.isolation.pod_security);
    let pod_security = namespaces::enforced(blueprint.isolation.pod_security, &own_labels);
    let mut identified = identify(objects, source.name.as_deref(), &mut problems);
    identified.iter_mut().for_each(helm::translate);
    let index = select::Index::new(&identified, blueprint);
    let services: BTreeSet<String> = identified
        .iter()
        .filter(|o| o.group.is_empty() && o.kind == "Service")
        .map(|o| o.name.clone())
        .collect();
    let mut left_out = Vec::new();
    let mut kept = Vec::new();
    for obj in identified {
        if namespaces::is_namespace(&obj.value) {
            match source.decide(&obj.name, &own_labels) {
                Ok(reason) => left_out.push(LeftOut {
                    kind: obj.kind,
                    name: obj.name,
                    reason,
                }),
                Err(reason) => problems.push(Problem::object(&obj.kind, &obj.name, reason)),
            }
            continue;
        }
        match select::decide(&obj, &index, blueprint) {
            select::Decision::LeaveOut(reason) => left_out.push(LeftOut {
                kind: obj.kind.clone(),
                name: obj.name.clone(),
                reason,
            }),
            select::Decision::Refuse(reason) => {
                problems.push(Problem::object(&obj.kind, &obj.name, reason));
            }
            select::Decision::Copy(class) => {
                problems.extend(refuse::check(&obj, class, &source));
                problems.extend(security::check(&obj, class, pod_security));
                kept.push((class, obj));
            }
        }
    }

    // Ingresses and Gateway API routes: their hosts come from the host template.
    let mut fronts: Vec<&mut Obj> = kept
        .iter_mut()
        .filter(|(class, _)| class.takes_hosts())
        .map(|(_, obj)| obj)
        .collect();
    let wildcard = ctx.edge.tls.is_some();
    let url = host_template
        .and_then(|t| hosts::rewrite(&mut fronts, &t, blueprint, wildcard, &mut problems));
    let mut routed: Vec<&mut Obj> = kept.iter_mut().map(|(_, obj)| obj).collect();
    let gate = edge::apply(&mut routed, &ctx.edge, ctx, &mut problems);

    // Only a blueprint with no other problem can be judged empty: a refused object may be the
    // workload it was meant to run.
    if problems.is_empty() {
        problems.extend(runnable::check(
            &kept,
            &left_out,
            objects.len(),
            blueprint,
            ctx,
        ));
    }
    if !problems.is_empty() {
        return Err(refused(problems, ctx));
    }

    // Claims restored from the Blueprint's data snapshot, StatefulSets' included.
    data::restore(&mut kept, ctx);

    let rewriter = rewrite::Rewriter {
        source: source.name.as_deref(),
        target: ctx.namespace.as_str(),
        services: &services,
    };
    let mut out = Vec::with_capacity(kept.len() + 1);
    for (class, mut obj) in kept {
        strip::strip(&mut obj, class);
        rewrite::rewrite(&mut obj, class, &rewriter);
        pods::rewrite(
            &mut obj,
            class,
            &tags,
            &blueprint.images,
            &blueprint.isolation.limit_range,
        );
        rewrite::identify_as_preview(&mut obj, class, ctx);
        out.push((class, obj));
    }
    let mut env = env::config_map(ctx, url.as_deref());
    rewrite::identify_as_preview(
        &mut env,
        kinds::Class::Builtin(kinds::Builtin::ConfigMap),
        ctx,
    );
    out.push((kinds::Class::Builtin(kinds::Builtin::ConfigMap), env));

    left_out.sort();
    // A file may declare the source's Namespace more than once: it is left out once.
    left_out.dedup();
    let mut plan = order::assemble(out, url, left_out);
    // The gate comes with the configuration: no route of the preview is ever served without it.
    for mut obj in gate {
        rewrite::identify_as_preview(&mut obj, kinds::Class::Extra, ctx);
        if let Some(config) = plan.steps.iter_mut().find(|s| s.stage == Stage::Config) {
            config.objects.push(obj.value);
        }
    }
    Ok(plan)
}

/// The labels the preview namespace takes from the blueprint: the Pod Security labels of the
/// source's own Namespace object (manifests that declare the namespace they come from) that
/// are at least as strict as the Blueprint's `isolation.podSecurity`. Merge them over
/// [`crate::guardrails::namespace_labels`] (they can only tighten it); for a blueprint
/// that [`plan`] accepts.
pub fn namespace_labels(
    objects: &[Value],
    blueprint: &BlueprintSpec,
    ctx: &PreviewContext,
) -> BTreeMap<String, String> {
    let source = namespaces::source(ctx.source_namespace.as_deref(), objects);
    namespaces::labels(objects, &source, blueprint.isolation.pod_security).kept
}

/// Parse each object's identity; objects without one become problems. Duplicates are refused:
/// which copy wins would depend on input order. An object's identity includes its namespace
/// (none and the source's are one and the same: the preview's): objects of other namespaces are
/// not duplicates of the source's, they are refused for naming another namespace.
fn identify(objects: &[Value], source: Option<&str>, problems: &mut Vec<Problem>) -> Vec<Obj> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(objects.len());
    for (i, value) in objects.iter().enumerate() {
        let label = format!("#{}", i + 1);
        let text = |path: &[&str]| {
            let mut v = value;
            for key in path {
                v = v.get(key)?;
            }
            v.as_str().filter(|s| !s.is_empty())
        };
        let (Some(api_version), Some(kind)) = (text(&["apiVersion"]), text(&["kind"])) else {
            problems.push(Problem::field(
                "object",
                &label,
                "apiVersion/kind",
                "an object needs apiVersion and kind",
            ));
            continue;
        };
        let Some(name) = text(&["metadata", "name"]) else {
            problems.push(Problem::field(
                kind,
                &label,
                "metadata.name",
                "is missing (generateName is not supported: a preview needs stable names)",
            ));
            continue;
        };
        let group = kinds::group_of(api_version).to_owned();
        let namespace = text(&["metadata", "namespace"]).filter(|ns| Some(*ns) != source);
        // The source's Namespace may be declared more than once (one file per component, each
        // with its Namespace): it is left out, whatever the copies say.
        let repeatable = namespaces::is_namespace(value);
        if !seen.insert((group.clone(), kind.to_owned(), namespace, name.to_owned())) && !repeatable
        {
            problems.push(Problem::field(
                kind,
                name,
                "metadata.name",
                format!("{api_version} {kind} {name} is defined more than once"),
            ));
            continue;
        }
        out.push(Obj {
            group,
            kind: kind.to_owned(),
            name: name.to_owned(),
            value: value.clone(),
        });
    }
    out
}

fn refused(mut problems: Vec<Problem>, ctx: &PreviewContext) -> Refused {
    // The Blueprint's own problems first (by field), then objects by kind and name; problems of
    // one object keep the order they were found in (the order of its fields).
    let key = |p: &Problem| {
        let of_blueprint = p.kind == "Blueprint" && p.name == ctx.blueprint;
        let field = if of_blueprint { p.field.clone() } else { None };
        (!of_blueprint, p.kind.clone(), p.name.clone(), field)
    };
    problems.sort_by_key(key);
    problems.dedup();
    Refused { problems }
}
