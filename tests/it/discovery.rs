//! How a client finds out what to authenticate with, against a running Sandcastle: without an
//! authorization server, a statement that a Kubernetes bearer token is required (at the metadata
//! paths, 404, and in every 401's challenge); with one, the RFC 9728 protected resource metadata
//! of Sandcastle and of `/mcp`, served without a token, naming it, the documentation it links
//! (served too) and the URL the client used; every 401 of the API and of MCP naming it.

use serde_json::json;

use crate::support::api::{call, client};
use crate::support::world::World;

const APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
";

#[tokio::test]
async fn discovery_says_to_send_a_kubernetes_bearer_token() {
    let mut world = World::unstarted("mcpdiscover", APP, json!({})).await;
    let addr = world.listen_on_a_port_of_its_own();
    world.start().await;
    let public = format!("http://{addr}");
    // No authorization server: no metadata a client could use (RFC 9728 and the MCP
    // specification require one), but a clear statement at its paths and in every 401.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let meta = call(&world, "GET", path, None, None).await;
        assert_eq!(meta.status, 404, "{path}: {:?}", meta.body);
        assert_eq!(meta.body["error"]["code"], "no_authorization_server");
        let message = meta.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("Kubernetes bearer token")
                && message.contains(&format!("{public}/docs/mcp.md")),
            "{message}"
        );
    }
    let docs = format!("{public}/docs/mcp.md");
    let page = client().get(&docs).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200, "{docs}");
    assert!(page.text().await.unwrap().contains("bearer token"));

    for (method, path) in [("POST", "/mcp"), ("GET", "/api/v1/previews")] {
        let refused = call(&world, method, path, None, Some(json!({}))).await;
        assert_eq!(refused.status, 401, "{path}");
        let challenge = refused.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.starts_with("Bearer realm=\"Sandcastle takes a Kubernetes bearer token")
                && !challenge.contains("resource_metadata"),
            "{path}: {challenge}"
        );
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("Kubernetes bearer token"), "{message}");
    }
    let nothing = call(&world, "GET", "/no-such-page", None, None).await;
    assert_eq!(
        nothing.status, 404,
        "a page that is not there is not hidden"
    );

    // With an authorization server configured, the metadata names it, and the resource is the
    // URL the client used, whatever address that was.
    let mut world = World::unstarted("mcpissuer", APP, json!({})).await;
    world.configure = Some(|parts| {
        parts.settings.authorization_server = Some("https://login.example.com".to_owned());
    });
    world.start().await;
    let used = format!("http://{}", world.addr());
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", used.clone()),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{used}/mcp"),
        ),
    ] {
        let meta = call(&world, "GET", path, None, None).await;
        assert_eq!(meta.status, 200, "{path} needs no token: {:?}", meta.body);
        assert_eq!(meta.body["resource"], resource.as_str(), "{path}");
        assert_eq!(meta.body["bearer_methods_supported"], json!(["header"]));
        assert_eq!(
            meta.body["authorization_servers"],
            json!(["https://login.example.com"]),
            "{path}: {:?}",
            meta.body
        );
        let docs = meta.body["resource_documentation"].as_str().unwrap();
        let page = client().get(docs).send().await.unwrap();
        assert_eq!(page.status().as_u16(), 200, "{docs}");
    }
    // Behind a proxy that says the scheme, and by another name.
    let behind = client()
        .get(format!("{used}/.well-known/oauth-protected-resource/mcp"))
        .header("host", "sandcastle.internal.example:8443")
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let meta: serde_json::Value = behind.json().await.unwrap();
    assert_eq!(
        meta["resource"],
        "https://sandcastle.internal.example:8443/mcp"
    );
    let refused = call(&world, "POST", "/mcp", None, Some(json!({}))).await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.headers["www-authenticate"].to_str().unwrap(),
        format!("Bearer resource_metadata=\"{used}/.well-known/oauth-protected-resource/mcp\"")
    );
}
