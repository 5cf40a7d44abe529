//! How a client finds out what to authenticate with, against a running Sandcastle: the RFC 9728
//! protected resource metadata of Sandcastle and of `/mcp`, served without a token, naming the
//! documentation it links (served too) and an authorization server only when one is configured;
//! every 401 of the API and of MCP naming it in `WWW-Authenticate`.

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
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", public.clone()),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{public}/mcp"),
        ),
    ] {
        let meta = call(&world, "GET", path, None, None).await;
        assert_eq!(meta.status, 200, "{path} needs no token: {:?}", meta.body);
        assert_eq!(meta.body["resource"], resource.as_str(), "{path}");
        assert_eq!(meta.body["bearer_methods_supported"], json!(["header"]));
        assert!(
            meta.body.get("authorization_servers").is_none(),
            "none is configured: {:?}",
            meta.body
        );
        let docs = meta.body["resource_documentation"].as_str().unwrap();
        let page = client().get(docs).send().await.unwrap();
        assert_eq!(page.status().as_u16(), 200, "{docs}");
        let text = page.text().await.unwrap();
        assert!(text.contains("bearer token"), "{docs}: {}", &text[..200]);
    }

    for (method, path, metadata) in [
        (
            "POST",
            "/mcp",
            format!("{public}/.well-known/oauth-protected-resource/mcp"),
        ),
        (
            "GET",
            "/api/v1/previews",
            format!("{public}/.well-known/oauth-protected-resource"),
        ),
    ] {
        let refused = call(&world, method, path, None, Some(json!({}))).await;
        assert_eq!(refused.status, 401, "{path}");
        let challenge = refused.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.starts_with("Bearer ")
                && challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
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

    // With an authorization server configured, the metadata names it.
    let mut world = World::unstarted("mcpissuer", APP, json!({})).await;
    world.configure = Some(|parts| {
        parts.settings.authorization_server = Some("https://login.example.com".to_owned());
    });
    world.start().await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let meta = call(&world, "GET", path, None, None).await;
        assert_eq!(
            meta.body["authorization_servers"],
            json!(["https://login.example.com"]),
            "{path}: {:?}",
            meta.body
        );
    }
}
