//! GitHub refusing the App's credentials (a private key deleted on GitHub, a wrong App id) is a
//! configuration fault, not an outage: the API answers it as such, never "try again", and
//! `/readyz` says it until GitHub accepts them again.

use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::world::{World, sha};

#[tokio::test]
async fn refused_credentials_are_said_as_such_and_not_as_an_outage() {
    let world = World::new("creds", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: ghcr.io/acme/web:1}]}\n", json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    world.gh.set_branch(&world.repo, "agent/x", &sha());
    world.gh.revoke_app_key(true);

    let body =
        json!({"blueprint": "creds", "repository": world.repo.as_str(), "branch": "agent/x"});
    let refused = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(body.clone()),
    )
    .await;
    assert_eq!(refused.status, 500, "{:?}", refused.body);
    assert_eq!(refused.body["error"]["code"], "github_credentials_rejected");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("retrying will not help") && message.contains("private key"),
        "{message}"
    );

    let (status, ready) = world.get_from(world.addr(), "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["github"]["credentialsRejected"], true, "{ready}");
    assert!(
        ready["github"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("an administrator must fix them")),
        "{ready}"
    );

    // Fixed on GitHub's side: the next call works, and /readyz stops saying it.
    world.gh.revoke_app_key(false);
    let created = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let (_, ready) = world.get_from(world.addr(), "/readyz").await;
    assert_eq!(ready["github"]["credentialsRejected"], false, "{ready}");
}
