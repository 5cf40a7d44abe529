//! A Blueprint test as the Job that runs it in a preview. Its template is read as a Job spec or
//! a Job template and checked — Pod Security at the preview's level, no ServiceAccount but the
//! preview's `preview-agent`, no Secret the preview does not have — then given what every pod
//! of the preview gets (the Blueprint's image rules, the `sandcastle-env` variables, limits that
//! fit the LimitRange) and its own: `SANDCASTLE_URL` and `SANDCASTLE_TOKEN_FILE`, the
//! `preview-agent` account with its token mounted, `restartPolicy: Never`, no retry unless the
//! template asks, and the test's timeout as `activeDeadlineSeconds`.
//!
//! Secrets by name: the Job runs in the preview's namespace, which holds the Secrets the plan
//! copied and two of Sandcastle's own (`preview-agent-anchor`, empty, and with
//! `--preview-tls-secret` the wildcard certificate's key, `sandcastle-tls`). A reference to any
//! other name would only leave the pod waiting; a reference to Sandcastle's own would hand the
//! test a key the preview's workloads never see. Both are refused, naming the Secret.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::kinds::{Builtin, Class};
use super::pods::{self, CONTAINER_LISTS};
use super::{Obj, Plan, PreviewContext, Problem, images, security};
use crate::guardrails::PREVIEW_AGENT;
use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PREVIEW, TEST};
use sandcastle_crd::{BlueprintSpec, TestSpec};

/// Where a pod's ServiceAccount token is mounted (`SANDCASTLE_TOKEN_FILE`).
pub const TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The Job running run `run` of `test` (its index among the Blueprint's tests is `index`) in
/// the preview `plan` is of; every problem when the template cannot be run as it is.
pub fn test_job(
    blueprint: &BlueprintSpec,
    (index, test): (usize, &TestSpec),
    run: u32,
    plan: &Plan,
    ctx: &PreviewContext,
) -> Result<Value, Vec<Problem>> {
    let at = format!("spec.tests[{index}].template");
    let problem = |field: &str, reason: String| {
        let field = if field.is_empty() {
            at.clone()
        } else {
            format!("{at}.{field}")
        };
        Problem::field("Blueprint", &ctx.blueprint, field, reason)
    };
    let Some((mut spec, template_at)) = job_spec(&test.template) else {
        return Err(vec![problem(
            "",
            "is neither a Job spec ({template: {spec: {containers: […]}}}) nor a Job template \
             ({spec: <Job spec>}) with containers"
                .to_owned(),
        )]);
    };
    let pod_at = format!("{template_at}.spec");
    let name = format!("test-{}-{run}", test.name);
    let mut problems = Vec::new();
    let pod = &spec["template"]["spec"];
    for key in ["serviceAccountName", "serviceAccount"] {
        if let Some(sa) = pod[key].as_str().filter(|s| *s != PREVIEW_AGENT) {
            problems.push(problem(
                &format!("{pod_at}.{key}"),
                format!(
                    "names ServiceAccount {:?}: tests run as the preview's {PREVIEW_AGENT}",
                    super::super::quote::short(sa)
                ),
            ));
        }
    }
    let copied = copied_secrets(plan);
    for (field, secret) in secret_references(pod) {
        if !copied.contains(&secret) {
            let have = if copied.is_empty() {
                "none".to_owned()
            } else {
                copied.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            problems.push(problem(
                &format!("{pod_at}.{field}"),
                format!(
                    "names Secret {:?}, which the preview does not have (it copied: {have})",
                    super::super::quote::short(&secret)
                ),
            ));
        }
    }
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name}, "spec": spec.clone()});
    let mut obj = Obj {
        group: "batch".to_owned(),
        kind: "Job".to_owned(),
        name: name.clone(),
        value: job,
    };
    let class = Class::Builtin(Builtin::Job);
    for mut p in security::check(&obj, class, blueprint.isolation.pod_security) {
        p.kind = "Blueprint".to_owned();
        p.name = ctx.blueprint.clone();
        let inner = p.field.as_deref().unwrap_or_default();
        let inner = inner.strip_prefix("spec.template").unwrap_or(inner);
        p.field = Some(format!("{at}.{template_at}{inner}"));
        problems.push(p);
    }
    let tags = images::render_tags(blueprint, ctx, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    pods::rewrite(
        &mut obj,
        class,
        &tags,
        &blueprint.images,
        &blueprint.isolation.limit_range,
    );
    spec = obj.value["spec"].take();
    finish(&mut spec, test, plan.url.as_deref());
    let labels = json!({MANAGED_BY: MANAGER, PREVIEW: ctx.preview.as_str(), TEST: test.name});
    spec["template"]["metadata"]["labels"][TEST] = json!(test.name);
    spec["template"]["metadata"]["labels"][MANAGED_BY] = json!(MANAGER);
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ctx.namespace.as_str(), "labels": labels},
        "spec": spec,
    }))
}

/// The Job spec `template` holds — itself (a Job spec, with `template`), or its `spec` (a Job
/// template) — and where its pod template is in it; `None` when neither has a pod spec with
/// containers.
fn job_spec(template: &Value) -> Option<(Value, &'static str)> {
    let has_pods = |s: &Value| s["template"]["spec"]["containers"].is_array();
    if has_pods(template) {
        return Some((template.clone(), "template"));
    }
    let inner = template.get("spec")?;
    has_pods(inner).then(|| (inner.clone(), "spec.template"))
}

/// What Sandcastle sets on every test Job, over the template.
fn finish(spec: &mut Value, test: &TestSpec, url: Option<&str>) {
    let timeout = test.timeout.get().as_secs().max(1);
    spec["activeDeadlineSeconds"] = json!(timeout);
    if spec.get("backoffLimit").is_none_or(Value::is_null) {
        spec["backoffLimit"] = json!(0);
    }
    let pod = &mut spec["template"]["spec"];
    pod["serviceAccountName"] = json!(PREVIEW_AGENT);
    if let Some(map) = pod.as_object_mut() {
        map.remove("serviceAccount");
    }
    pod["automountServiceAccountToken"] = json!(true);
    if pod["restartPolicy"].as_str() != Some("OnFailure") {
        pod["restartPolicy"] = json!("Never");
    }
    let env = [
        ("SANDCASTLE_URL", url.unwrap_or_default()),
        ("SANDCASTLE_TOKEN_FILE", TOKEN_FILE),
        ("SANDCASTLE_TEST", test.name.as_str()),
    ];
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            if !c["env"].is_array() {
                c["env"] = json!([]);
            }
            let Some(vars) = c["env"].as_array_mut() else {
                continue;
            };
            vars.retain(|v| !env.iter().any(|(k, _)| v["name"].as_str() == Some(*k)));
            vars.extend(env.iter().map(|(k, v)| json!({"name": k, "value": v})));
        }
    }
}

/// The Secrets of the plan (by name): what the preview's namespace holds of the Blueprint's.
fn copied_secrets(plan: &Plan) -> BTreeSet<String> {
    plan.objects()
        .filter(|o| o["kind"] == "Secret" && o["apiVersion"] == "v1")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Every Secret a pod spec names, with where: volumes (`secret`, `projected`), `env`
/// `secretKeyRef`, `envFrom` `secretRef`, `imagePullSecrets`.
fn secret_references(pod: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |field: String, v: &Value| {
        if let Some(name) = v.as_str() {
            out.push((field, name.to_owned()));
        }
    };
    for (i, vol) in items(&pod["volumes"]) {
        push(format!("volumes[{i}].secret"), &vol["secret"]["secretName"]);
        for (j, src) in items(&vol["projected"]["sources"]) {
            push(
                format!("volumes[{i}].projected.sources[{j}].secret"),
                &src["secret"]["name"],
            );
        }
    }
    for (i, s) in items(&pod["imagePullSecrets"]) {
        push(format!("imagePullSecrets[{i}]"), &s["name"]);
    }
    for list in CONTAINER_LISTS {
        for (i, c) in items(&pod[list]) {
            for (j, e) in items(&c["env"]) {
                push(
                    format!("{list}[{i}].env[{j}].valueFrom.secretKeyRef"),
                    &e["valueFrom"]["secretKeyRef"]["name"],
                );
            }
            for (j, e) in items(&c["envFrom"]) {
                push(
                    format!("{list}[{i}].envFrom[{j}].secretRef"),
                    &e["secretRef"]["name"],
                );
            }
        }
    }
    out
}

fn items(v: &Value) -> impl Iterator<Item = (usize, &Value)> {
    v.as_array().into_iter().flatten().enumerate()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{blueprint, ctx};
    use sandcastle_crd::RunOn;

    fn test(template: Value) -> TestSpec {
        TestSpec {
            name: "smoke".to_owned(),
            template,
            run_on: RunOn::Ready,
            timeout: sandcastle_crd::GoDuration::from_secs(120),
        }
    }

    fn plan_with(objects: &[Value]) -> Plan {
        let bp = blueprint("");
        let mut all = objects.to_vec();
        all.push(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
        );
        super::super::plan(&all, &bp, &ctx()).unwrap()
    }

    #[test]
    fn a_job_spec_or_template_becomes_the_tests_job() {
        let bp = blueprint("images: [{repository: ghcr.io/acme/tests}]\n");
        let plan = plan_with(&[]);
        let spec = json!({"template": {"spec": {"containers": [
            {"name": "t", "image": "ghcr.io/acme/tests:latest", "env": [{"name": "SANDCASTLE_URL", "value": "x"}]}]}}});
        let job = test_job(&bp, (0, &test(spec.clone())), 3, &plan, &ctx()).unwrap();
        assert_eq!(job["metadata"]["name"], "test-smoke-3");
        assert_eq!(job["metadata"]["labels"][TEST], "smoke");
        assert_eq!(job["metadata"]["labels"][PREVIEW], ctx().preview.as_str());
        assert!(
            job["metadata"]["labels"]["sandcastle.dev/sha"].is_null(),
            "never pruned"
        );
        let s = &job["spec"];
        assert_eq!(s["activeDeadlineSeconds"], 120);
        assert_eq!(s["backoffLimit"], 0);
        let pod = &s["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], PREVIEW_AGENT);
        assert_eq!(pod["automountServiceAccountToken"], true);
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(
            c["image"],
            format!("ghcr.io/acme/tests:{}", ctx().sha),
            "the PR's build"
        );
        let env = c["env"].as_array().unwrap();
        let url: Vec<_> = env
            .iter()
            .filter(|e| e["name"] == "SANDCASTLE_URL")
            .collect();
        assert_eq!(url.len(), 1, "{env:?}");
        assert_eq!(url[0]["value"], plan.url.clone().unwrap_or_default());
        assert!(env.iter().any(|e| e["value"] == TOKEN_FILE));
        assert_eq!(c["envFrom"][0]["configMapRef"]["name"], "sandcastle-env");

        let template = json!({"metadata": {"labels": {"x": "y"}}, "spec": spec});
        let job2 = test_job(&bp, (0, &test(template)), 3, &plan, &ctx()).unwrap();
        assert_eq!(job2["spec"]["template"], job["spec"]["template"]);
    }

    #[test]
    fn secrets_the_preview_lacks_and_other_accounts_are_refused() {
        let bp = blueprint("");
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
            "type": "Opaque", "data": {"password": "aGk="}});
        let plan = plan_with(&[secret]);
        let pod = json!({"serviceAccountName": "default", "containers": [{"name": "t", "image": "busybox",
            "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                    {"name": "K", "valueFrom": {"secretKeyRef": {"name": "sandcastle-tls", "key": "tls.key"}}}]}],
            "volumes": [{"name": "v", "secret": {"secretName": "prod-creds"}}]});
        let refused = test_job(
            &bp,
            (1, &test(json!({"template": {"spec": pod}}))),
            1,
            &plan,
            &ctx(),
        )
        .unwrap_err();
        let text: Vec<String> = refused.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(text.iter().any(|t| {
            t.contains("spec.tests[1].template.template.spec.serviceAccountName")
                && t.contains("preview-agent")
        }));
        assert!(
            text.iter()
                .any(|t| t.contains("\"sandcastle-tls\"") && t.contains("it copied: db"))
        );
        assert!(
            text.iter()
                .any(|t| t.contains("volumes[0].secret") && t.contains("\"prod-creds\""))
        );
        let privileged = json!({"template": {"spec": {"containers": [{"name": "t", "image": "busybox",
            "securityContext": {"privileged": true}}]}}});
        let refused = test_job(&bp, (0, &test(privileged)), 1, &plan, &ctx()).unwrap_err();
        assert!(refused[0].to_string().contains("privileged"), "{refused:?}");
        let empty = test_job(&bp, (0, &test(json!({"image": "x"}))), 1, &plan, &ctx());
        assert!(
            empty.unwrap_err()[0]
                .to_string()
                .contains("neither a Job spec")
        );
    }
}
