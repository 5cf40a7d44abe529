//! The GitHub App manifest asks for exactly the permissions and events Sandcastle uses.

use serde_json::{Value, json};

#[test]
fn manifest_lists_the_permissions_and_events_sandcastle_needs() {
    let text = std::fs::read_to_string("app-manifest.yml").unwrap();
    let m: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        m["default_permissions"],
        json!({"deployments": "write", "issues": "write", "pull_requests": "read", "contents": "read", "checks": "write", "metadata": "read"})
    );
    assert_eq!(
        m["default_events"],
        json!([
            "pull_request",
            "issue_comment",
            "check_run",
            "installation",
            "installation_repositories"
        ])
    );
    assert_eq!(m["public"], json!(false));
    assert!(
        m["hook_attributes"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/github/webhook")
    );
    for key in ["name", "url", "redirect_url"] {
        assert!(m[key].is_string(), "{key} is required");
    }
}
