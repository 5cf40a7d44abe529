//! Names as they enter: a branch whose name hides its text (Unicode bidirectional controls) is
//! refused wherever a branch comes in — a webhook delivery, a `/preview` command, the API's
//! create, the catch-up resync's reading of GitHub — and a pull request number must be a JSON
//! integer.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::ListParams;
use sandcastle::serve::Parts;
use sandcastle_fake_github::{Delivery, PrSpec, Role};
use serde_json::{Value, json};

use crate::conversation::{MAINTAINER, comment, replies};
use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);
const HOUR: Duration = Duration::from_secs(3600);

/// A branch name that reads `fix/exe.png` on screen.
const HIDDEN: &str = "fix/\u{202e}gnp.exe";

/// `d` with its JSON body changed by `change` (signed again when delivered).
fn edited(d: &Delivery, change: impl FnOnce(&mut Value)) -> Delivery {
    let mut v = d.json();
    change(&mut v);
    Delivery {
        body: serde_json::to_vec(&v).unwrap(),
        ..d.clone()
    }
}

async fn preview_names(world: &World) -> Vec<String> {
    let mut names: Vec<String> = world
        .previews()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn branches_that_hide_their_text_and_numbers_as_strings_are_refused() {
    let mut world = World::unstarted("names", TINY_APP, json!({})).await;
    world.configure = Some(|parts: &mut Parts| {
        parts.settings.resync = true;
        // Only the start-up round runs during the test.
        parts.settings.housekeeping_interval = HOUR;
    });
    world.start().await;

    // A delivery: refused naming the field, nothing written.
    let hidden = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(2), sha(), HIDDEN));
    let (status, body) = world.deliver(&hidden).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_payload")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("pull_request.head.ref: "), "{message}");
    assert!(
        !message.contains('\u{202e}'),
        "the control is quoted, not echoed: {message:?}"
    );
    // A maintainer's `/preview` on it (the command reads the branch from GitHub) is refused too.
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    let (status, outcome, _) = comment(&world, 2, MAINTAINER, "/preview").await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (200, Some("refused")),
        "{outcome}"
    );
    let said = eventually("the reply", T, || {
        let said = replies(&world, 2);
        async move {
            said.last()
                .cloned()
                .ok_or_else(|| "no reply yet".to_owned())
        }
    })
    .await;
    assert!(
        said.starts_with("Sandcastle does not deploy branch \"fix/\\u{202e}gnp.exe\": "),
        "{said}"
    );

    // A number sent as a string: refused naming the field.
    let fine = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(3), sha(), "fix/cart"));
    let as_string = edited(&fine, |v| v["pull_request"]["number"] = json!("3"));
    let (status, body) = world.deliver(&as_string).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_payload")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("pull_request.number: "),
        "{body}"
    );
    assert_eq!(preview_names(&world).await, Vec::<String>::new());

    // The API's create: refused as the caller's field.
    let admin = account(&world, "admin", &[ALL]).await;
    world.gh.set_branch(&world.repo, HIDDEN, &sha());
    let created = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(json!({"blueprint": "names", "repository": world.repo.as_str(), "branch": HIDDEN})),
    )
    .await;
    assert_eq!(
        (created.status, created.body["error"]["code"].as_str()),
        (422, Some("invalid_branch")),
        "{:?}",
        created.body
    );
    assert_eq!(created.body["error"]["field"], "branch");

    // Sandcastle restarts; the resync reads the open pull requests from GitHub, newest first:
    // PR 3 gets its preview, PR 2 (its branch hides its text) none, and PR 1 (whose delivery
    // was lost) one — written after PR 2 would have been.
    world.sandcastle.take().unwrap().abort();
    let _lost = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "fix/login"));
    world.start().await;
    world
        .wait_phase("names-pr-1", sandcastle::crd::Phase::Ready, T)
        .await;
    assert_eq!(preview_names(&world).await, ["names-pr-1", "names-pr-3"]);
}
