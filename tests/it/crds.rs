//! The generated CRDs install, accept valid resources and make the API server reject invalid ones
//! with a message naming the field.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use sandcastle::crd::{self, Blueprint, PreviewEnvironment};
use serde_json::{Value, json};

use crate::support::{TestNamespace, client};

async fn ready_client() -> Client {
    let client = client().await;
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .expect("installing CRDs");
    client
}

fn blueprint(spec: Value) -> Value {
    json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint", "metadata": {"name": "shop"}, "spec": spec})
}

fn preview(spec: Value) -> Value {
    json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment", "metadata": {"name": "shop-pr-1"}, "spec": spec})
}

/// Create through the dynamic API so that invalid objects reach the server unchanged.
async fn create(
    client: &Client,
    ns: &str,
    kind: &str,
    obj: Value,
) -> Result<DynamicObject, String> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("sandcastle.dev", "v1alpha1", kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .map_err(|e| e.to_string())
}

fn valid_preview_spec() -> Value {
    json!({
        "blueprint": "shop",
        "repository": "acme/shop",
        "pullRequest": 42,
        "ref": "feature/login",
        "sha": "e4d2fb5e8e4c5f9c5a2e0f0f1d6e6e7c8b9a0b1c",
        "requestedBy": {"kind": "github-user", "name": "octocat"}
    })
}

#[tokio::test]
async fn valid_resources_are_accepted_with_defaults() {
    let client = ready_client().await;
    let ns = TestNamespace::new(&client, "it-crds-valid").await;
    let created = create(
        &client,
        &ns.name,
        "Blueprint",
        blueprint(json!({
            "source": {"namespace": "shop-staging"},
            "repositories": ["acme/shop", "acme/*"]
        })),
    )
    .await
    .expect("valid blueprint accepted");
    // The object as the API server stored it, before any serde default of ours.
    assert_eq!(
        (
            created.data["spec"]["ttl"].as_str(),
            created.data["spec"]["maxTtl"].as_str()
        ),
        (Some("24h"), Some("168h")),
        "defaults are applied by the API server"
    );
    let bp: Blueprint = ns.api::<Blueprint>().get("shop").await.unwrap();
    assert_eq!(bp.spec.ttl.get(), Duration::from_secs(24 * 3600));
    assert_eq!(bp.spec.max_previews, 20);
    assert_eq!(bp.spec.isolation.quota.pods, 50);

    create(
        &client,
        &ns.name,
        "PreviewEnvironment",
        preview(valid_preview_spec()),
    )
    .await
    .expect("valid preview accepted");
    let pe: PreviewEnvironment = ns
        .api::<PreviewEnvironment>()
        .get("shop-pr-1")
        .await
        .unwrap();
    assert_eq!(pe.spec.pull_request, Some(42));
    assert!(!pe.spec.stopped);
}

#[tokio::test]
async fn invalid_blueprints_are_rejected_naming_the_field() {
    let client = ready_client().await;
    let ns = TestNamespace::new(&client, "it-crds-invalid").await;
    let cases = [
        (
            json!({"source": {"namespace": "s"}, "repositories": ["not-a-repo"]}),
            "spec.repositories[0]",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": ["a/b"], "trigger": "sometimes"}),
            "spec.trigger",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": ["a/b"], "ttl": "-1h"}),
            "spec.ttl",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": ["a/b"], "ttl": "200h"}),
            "ttl must not be longer than maxTtl",
        ),
        (
            json!({"source": {}, "repositories": ["a/b"]}),
            "set exactly one of source.namespace, source.manifests, source.helm or source.kustomize",
        ),
        (
            json!({"source": {"namespace": "s", "manifests": {"configMap": "m"}}, "repositories": ["a/b"]}),
            "set exactly one",
        ),
        (
            json!({"source": {"helm": {"path": "deploy/chart"}, "kustomize": {"path": "deploy"}}, "repositories": ["a/b"]}),
            "set exactly one",
        ),
        (
            json!({"source": {"helm": {"path": "deploy/../../etc"}}, "repositories": ["a/b"]}),
            "path must stay inside the repository",
        ),
        (
            json!({"source": {"helm": {"path": "chart", "valuesFiles": ["../secrets.yaml"]}}, "repositories": ["a/b"]}),
            "values files must stay inside the repository",
        ),
        (
            json!({"source": {"kustomize": {"path": "/etc"}}, "repositories": ["a/b"]}),
            "spec.source.kustomize.path",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": []}),
            "spec.repositories",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": ["a/b"], "maxPreviews": 0}),
            "spec.maxPreviews",
        ),
        (
            json!({"source": {"namespace": "s"}, "repositories": ["a/b"], "secrets": {"mode": "copy", "allowlist": ["x"]}}),
            "allowlist is only used",
        ),
    ];
    for (spec, needle) in cases {
        let err = create(&client, &ns.name, "Blueprint", blueprint(spec.clone()))
            .await
            .expect_err(&format!("blueprint {spec} must be rejected"));
        assert!(
            err.contains(needle),
            "rejection of {spec} should mention {needle:?}, got: {err}"
        );
    }
}

#[tokio::test]
async fn invalid_previews_are_rejected_naming_the_field() {
    let client = ready_client().await;
    let ns = TestNamespace::new(&client, "it-crds-invalid-pe").await;
    let with = |k: &str, v: Value| {
        let mut s = valid_preview_spec();
        s[k] = v;
        s
    };
    let cases = [
        (with("repository", json!("acme")), "spec.repository"),
        (with("sha", json!("abc")), "spec.sha"),
        (with("pullRequest", json!(0)), "spec.pullRequest"),
        (
            with("requestedBy", json!({"kind": "robot", "name": "x"})),
            "spec.requestedBy.kind",
        ),
    ];
    for (spec, needle) in cases {
        let err = create(
            &client,
            &ns.name,
            "PreviewEnvironment",
            preview(spec.clone()),
        )
        .await
        .expect_err(&format!("preview {spec} must be rejected"));
        assert!(
            err.contains(needle),
            "rejection of {spec} should mention {needle:?}, got: {err}"
        );
    }
}

/// The API server warns (`unrecognized format "uint32"`) about schema formats it does not know,
/// on every `kubectl apply` of the chart's CRDs; ours must draw no warning. Created with a
/// dry run under another group, so the server judges them as new definitions (on an update it
/// only warns about formats the update introduces).
#[tokio::test]
async fn the_definitions_draw_no_warning_from_the_api_server() {
    let client = client().await;
    for crd in crd::definitions() {
        let mut crd = serde_json::to_value(&crd).unwrap();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_owned();
        let group = "formats.sandcastle.test";
        crd["spec"]["group"] = json!(group);
        crd["metadata"] = json!({"name": format!("{plural}.{group}")});
        let request = http::Request::post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All",
        )
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&crd).unwrap()))
        .unwrap();
        let response = client.send(request).await.expect("API server answers");
        let status = response.status();
        let warnings: Vec<String> = response
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect();
        assert!(status.is_success(), "{plural}: {status}");
        assert!(warnings.is_empty(), "{plural}: {warnings:?}");
    }
}
