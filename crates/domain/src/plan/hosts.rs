//! The hosts of a preview (its Ingresses' and its Gateway API routes') and the preview URL.
//!
//! Every host is rewritten from the host template (the Blueprint's `host`, else Sandcastle's
//! default): custom domains are never copied. `{{host}}` is the first DNS label of the original
//! host, so distinct hosts stay distinct. When the template has no `{{host}}` and the blueprint
//! has several hosts, every host but the first is prefixed with `<its first label>-`; should
//! two hosts still meet, later ones get `-2`, `-3`… on their first label. Hosts are taken in a
//! fixed order: Ingresses by name, rule hosts first, then hosts only named in `tls`; then the
//! `spec.hostnames` of HTTPRoutes, then of GRPCRoutes, each by name. One original host gets one
//! preview host wherever it is named: an Ingress and an HTTPRoute naming `shop.example.com` both
//! name the same preview host.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::kinds::Builtin;
use super::routes;
use super::{Obj, PreviewContext, Problem};
use crate::naming::{fit_label, is_dns_label, slug};
use crate::template::{self, Value as Var};
use sandcastle_crd::BlueprintSpec;

const VARIABLES: [&str; 8] = [
    "pr", "repo", "owner", "branch", "sha", "shortSha", "preview", "host",
];

/// A host template that parses, with the preview's values ready.
#[derive(Debug)]
pub(crate) struct HostTemplate {
    template: String,
    from_blueprint: bool,
    uses_host: bool,
    blueprint: String,
    pr: Option<String>,
    repo: String,
    owner: String,
    branch: String,
    sha: String,
    short_sha: String,
    preview: String,
}

impl HostTemplate {
    /// The template to use, or `None` (with a problem naming `spec.host`) when it does not parse.
    pub(crate) fn new(
        blueprint: &BlueprintSpec,
        ctx: &PreviewContext,
        problems: &mut Vec<Problem>,
    ) -> Option<Self> {
        let (template, from_blueprint) = match &blueprint.host {
            Some(host) => (host.clone(), true),
            None => (ctx.default_host.clone(), false),
        };
        let t = Self {
            uses_host: template::uses(&template, "host"),
            template,
            from_blueprint,
            blueprint: ctx.blueprint.clone(),
            pr: ctx
                .pool_member
                .clone()
                .or_else(|| ctx.pr.map(|p| p.to_string())),
            repo: slug(ctx.repo.name()),
            owner: slug(ctx.repo.owner()),
            branch: slug(ctx.pool_member.as_deref().unwrap_or(&ctx.branch)),
            sha: ctx.sha.to_string(),
            short_sha: ctx.sha.short().to_owned(),
            preview: ctx.preview.to_string(),
        };
        match template::check(&t.template, &VARIABLES) {
            Ok(()) => Some(t),
            Err(e) => {
                problems.push(t.problem(e.to_string()));
                None
            }
        }
    }

    fn problem(&self, reason: String) -> Problem {
        let reason = if self.from_blueprint {
            reason
        } else {
            format!(
                "{reason} (in Sandcastle's default host template {:?}; set spec.host)",
                self.template
            )
        };
        Problem::field("Blueprint", &self.blueprint, "spec.host", reason)
    }

    /// The host for one original host label, lower-cased.
    fn render(&self, host: &str) -> Result<String, String> {
        let vars = [
            (
                "pr",
                self.pr
                    .as_deref()
                    .map_or(Var::Missing("this preview has no pull request"), Var::Text),
            ),
            ("repo", Var::Text(&self.repo)),
            ("owner", Var::Text(&self.owner)),
            ("branch", Var::Text(&self.branch)),
            ("sha", Var::Text(&self.sha)),
            ("shortSha", Var::Text(&self.short_sha)),
            ("preview", Var::Text(&self.preview)),
            ("host", Var::Text(host)),
        ];
        template::render(&self.template, &vars)
            .map(|h| h.to_ascii_lowercase())
            .map_err(|e| e.to_string())
    }
}

/// Whether `host` is a DNS name an Ingress accepts: labels of `[a-z0-9-]` (not starting or
/// ending with `-`, at most 63 characters), at most 253 characters in all.
fn valid_host(host: &str) -> bool {
    host.len() <= 253 && host.split('.').all(is_dns_label)
}

/// The first label of a host, as template text (`*.shop.example.com` gives `wildcard`).
fn host_label(host: &str) -> String {
    let first = host.split('.').next().unwrap_or_default();
    match slug(first) {
        s if s.is_empty() => "wildcard".to_owned(),
        s => s,
    }
}

/// Replace the first label of `host` with `f(first label)`, fitted to 63 characters.
fn with_first_label(host: &str, f: impl FnOnce(&str) -> String) -> String {
    let (first, rest) = host.split_once('.').unwrap_or((host, ""));
    let label = fit_label(&f(first), 63);
    if rest.is_empty() {
        label
    } else {
        format!("{label}.{rest}")
    }
}

fn rule_hosts(ingress: &Value) -> impl Iterator<Item = &str> {
    ingress["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["host"].as_str())
        .filter(|h| !h.is_empty())
}

fn tls_hosts(ingress: &Value) -> impl Iterator<Item = &str> {
    ingress["spec"]["tls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["hosts"].as_array())
        .flatten()
        .filter_map(Value::as_str)
}

fn is_ingress(obj: &Obj) -> bool {
    Builtin::find(&obj.group, &obj.kind) == Some(Builtin::Ingress)
}

/// Map every original host to its preview host. `fronts` are in host order (see [`rewrite`]).
fn map_hosts(
    fronts: &[&mut Obj],
    t: &HostTemplate,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, String> {
    let mut originals: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let ingresses = || fronts.iter().filter(|f| is_ingress(f));
    let rules = ingresses().flat_map(|i| rule_hosts(&i.value));
    let tls = ingresses().flat_map(|i| tls_hosts(&i.value));
    let routes = fronts
        .iter()
        .filter(|f| !is_ingress(f))
        .flat_map(|r| routes::hostnames(&r.value));
    for host in rules.chain(tls).chain(routes) {
        if seen.insert(host) {
            originals.push(host);
        }
    }
    let mut map = BTreeMap::new();
    let mut used: HashSet<String> = HashSet::new();
    // The suffix each base host was last given: those below it are all taken (hosts are only
    // ever added to `used`), so the search goes on from there, and each host is found in
    // constant time however many share its base.
    let mut next: HashMap<String, usize> = HashMap::new();
    for (i, original) in originals.into_iter().enumerate() {
        let label = host_label(original);
        let mut host = match t.render(&label) {
            Ok(h) => h,
            Err(e) => {
                problems.push(t.problem(e));
                return map;
            }
        };
        if !t.uses_host && i > 0 {
            host = with_first_label(&host, |first| format!("{label}-{first}"));
        }
        if used.contains(&host) {
            let base = host.clone();
            let n = next.entry(base.clone()).or_insert(2);
            loop {
                host = with_first_label(&base, |first| format!("{first}-{n}"));
                if !used.contains(&host) {
                    break;
                }
                *n += 1;
            }
        }
        host = with_first_label(&host, str::to_owned);
        if !valid_host(&host) {
            problems.push(t.problem(format!(
                "gives {original} the host {host:?}, which is not a valid DNS name"
            )));
            continue;
        }
        used.insert(host.clone());
        map.insert(original.to_owned(), host);
    }
    map
}

/// Put the preview hosts in place. Parts of the Ingress that are not of the shape an Ingress
/// has (a `spec`, rule or TLS block that is not a mapping) are left for the API server to
/// refuse, never written into.
fn set_hosts(ingress: &mut Value, map: &BTreeMap<String, String>) {
    let Some(spec) = ingress.get_mut("spec") else {
        return;
    };
    if let Some(rules) = spec.get_mut("rules").and_then(Value::as_array_mut) {
        for rule in rules {
            if let Some(new) = rule["host"].as_str().and_then(|h| map.get(h)) {
                rule["host"] = Value::String(new.clone());
            }
        }
    }
    if let Some(tls) = spec.get_mut("tls").and_then(Value::as_array_mut) {
        for block in tls {
            if let Some(hosts) = block.get_mut("hosts").and_then(Value::as_array_mut) {
                for host in hosts {
                    if let Some(new) = host.as_str().and_then(|h| map.get(h)) {
                        *host = Value::String(new.clone());
                    }
                }
            }
        }
    }
}

/// Where the host of the preview URL is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// By an Ingress, which lists the host under `tls` or not.
    Ingress { tls: bool },
    /// By an HTTPRoute of the shared Gateway.
    HttpRoute,
}

/// The preview URL's scheme, decided here and nowhere else: `https` with the wildcard
/// certificate (every preview host is served with it, `--preview-tls-secret`) or where an
/// Ingress lists the host under `tls`; `http` otherwise (an HTTPRoute is served over TLS only
/// by a listener of the shared Gateway, which the plan does not see).
fn scheme(served: Served, wildcard: bool) -> &'static str {
    match served {
        _ if wildcard => "https",
        Served::Ingress { tls: true } => "https",
        Served::Ingress { tls: false } | Served::HttpRoute => "http",
    }
}

/// Rewrite the hosts of every Ingress and Gateway API route of `fronts` and return the preview
/// URL: the host of the first Ingress rule whose paths lead to the Blueprint's `primaryService`,
/// else (no primary service, or none of its rules has a host) the first Ingress rule with a
/// host; without one, the first hostname of the first HTTPRoute with a rule leading to the
/// primary service, else of the first HTTPRoute with hostnames. Its scheme: [`scheme`].
pub(crate) fn rewrite(
    fronts: &mut [&mut Obj],
    t: &HostTemplate,
    blueprint: &BlueprintSpec,
    wildcard: bool,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    // Ingresses, then HTTPRoutes, then GRPCRoutes (the order of `Builtin`), each by name.
    fronts.sort_by_cached_key(|o| (Builtin::find(&o.group, &o.kind), o.name.clone()));
    let map = map_hosts(fronts, t, problems);
    for front in fronts.iter_mut() {
        if is_ingress(front) {
            set_hosts(&mut front.value, &map);
        } else {
            routes::set_hostnames(&mut front.value, &map);
        }
    }
    let primary = blueprint.primary_service.as_deref();
    let (host, served) = ingress_url(fronts, primary).or_else(|| route_url(fronts, primary))?;
    Some(format!("{}://{host}", scheme(served, wildcard)))
}

/// The preview URL's host an Ingress of `fronts` gives, and how it is served.
fn ingress_url(fronts: &[&mut Obj], primary: Option<&str>) -> Option<(String, Served)> {
    let candidates = || {
        fronts.iter().filter(|f| is_ingress(f)).flat_map(|i| {
            i.value["spec"]["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["host"].as_str().is_some_and(|h| !h.is_empty()))
                .map(move |r| (&i.value, r))
        })
    };
    let serves = |rule: &Value, service: &str| {
        rule["http"]["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["backend"]["service"]["name"].as_str() == Some(service))
    };
    let primary = primary.and_then(|s| candidates().find(|(_, r)| serves(r, s)));
    let (ingress, rule) = primary.or_else(|| candidates().next())?;
    let host = rule["host"].as_str()?;
    let tls = tls_hosts(ingress).any(|h| h == host);
    Some((host.to_owned(), Served::Ingress { tls }))
}

/// The preview URL's host an HTTPRoute of `fronts` gives.
fn route_url(fronts: &[&mut Obj], primary: Option<&str>) -> Option<(String, Served)> {
    let named = || {
        fronts
            .iter()
            .filter(|f| Builtin::find(&f.group, &f.kind) == Some(Builtin::HttpRoute))
            .map(|f| &f.value)
            .filter(|r| routes::hostnames(r).next().is_some())
    };
    let route = primary
        .and_then(|s| named().find(|r| routes::serves(r, s)))
        .or_else(|| named().next())?;
    let host = routes::hostnames(route).next()?;
    Some((host.to_owned(), Served::HttpRoute))
}

/// The Service and port the preview URL's host leads to, for probing it directly: with an
/// Ingress, the first path of its first rule of that host (a named port is looked up in that
/// Service among `objects`); else the Service an HTTPRoute naming the host sends every path to
/// (else its first rule's).
pub fn backend_of<'a>(
    objects: impl Iterator<Item = &'a Value> + Clone,
    url: &str,
) -> Option<(String, u16)> {
    let host = url.split_once("://").map_or(url, |(_, h)| h);
    let rule = objects
        .clone()
        .filter(|o| o["kind"] == "Ingress")
        .flat_map(|i| i["spec"]["rules"].as_array().cloned().unwrap_or_default())
        .find(|r| r["host"].as_str() == Some(host));
    let Some(rule) = rule else {
        return routes::backend_of(objects, host);
    };
    let backend = &rule["http"]["paths"][0]["backend"]["service"];
    let name = backend["name"].as_str()?.to_owned();
    let port = match backend["port"]["number"].as_u64() {
        Some(n) => u16::try_from(n).ok()?,
        None => {
            let wanted = backend["port"]["name"].as_str()?;
            let service = objects
                .filter(|o| o["kind"] == "Service")
                .find(|o| o["metadata"]["name"].as_str() == Some(name.as_str()))?;
            let ports = service["spec"]["ports"].as_array()?;
            let port = ports.iter().find(|p| p["name"].as_str() == Some(wanted))?;
            u16::try_from(port["port"].as_u64()?).ok()?
        }
    };
    Some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_validated_as_dns_names() {
        assert!(valid_host("42-shop.preview.example.com"));
        assert!(!valid_host("-42.example.com"));
        assert!(!valid_host("a_b.example.com"));
        assert!(!valid_host("a..b"));
        assert!(!valid_host(&format!("{}.com", "a".repeat(64))));
    }

    #[test]
    fn first_labels_are_template_text() {
        assert_eq!(host_label("shop.example.com"), "shop");
        assert_eq!(host_label("Admin_UI.example.com"), "admin-ui");
        assert_eq!(host_label("*.example.com"), "wildcard");
        assert_eq!(
            with_first_label("42-shop.preview.example.com", |f| format!("admin-{f}")),
            "admin-42-shop.preview.example.com"
        );
        assert_eq!(
            with_first_label("localhost", |f| format!("{f}-2")),
            "localhost-2"
        );
    }

    #[test]
    fn only_an_ingress_listing_the_host_under_tls_gives_https() {
        assert_eq!(scheme(Served::Ingress { tls: true }, false), "https");
        assert_eq!(scheme(Served::Ingress { tls: false }, false), "http");
        assert_eq!(scheme(Served::HttpRoute, false), "http");
        assert_eq!(scheme(Served::HttpRoute, true), "https");
        assert_eq!(scheme(Served::Ingress { tls: false }, true), "https");
    }

    #[test]
    fn the_url_leads_to_its_service_and_port() {
        let objects = [
            serde_json::json!({"kind": "Ingress", "spec": {"rules": [
                {"host": "admin-1.example.com", "http": {"paths": [{"backend": {"service": {"name": "admin", "port": {"number": 81}}}}]}},
                {"host": "pr-1.example.com", "http": {"paths": [{"backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}}),
            serde_json::json!({"kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [
                {"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}]}}),
        ];
        assert_eq!(
            backend_of(objects.iter(), "https://pr-1.example.com"),
            Some(("web".to_owned(), 8080))
        );
        assert_eq!(
            backend_of(objects.iter(), "http://admin-1.example.com"),
            Some(("admin".to_owned(), 81))
        );
        assert_eq!(backend_of(objects.iter(), "http://other.example.com"), None);
        // A host no Ingress has is looked for among the HTTPRoutes.
        let route = serde_json::json!({"kind": "HTTPRoute", "spec": {"hostnames": ["r.example.com"],
            "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}});
        let with_route = [&objects[..], std::slice::from_ref(&route)].concat();
        assert_eq!(
            backend_of(with_route.iter(), "http://r.example.com"),
            Some(("web".to_owned(), 8080))
        );
    }
}
