//! `--probe-via service` end to end: Sandcastle probes the primary Service by its cluster name
//! (`app.<namespace>.svc:80`, the preview's host in `Host`), as it does when it runs in the
//! cluster. Here `sandcastle serve` runs as a process on the host in a mount namespace of its own
//! whose `/etc/resolv.conf` names the cluster's DNS (CoreDNS at 10.0.0.10, `search
//! cluster.local`), as a pod's does; the host routes the Service range to the node, where
//! kube-proxy sends the probe to the app's pod. The preview's own host does not resolve there, so
//! `success` can only come through the Service. Probed that way, the app is checked, not the
//! ingress controller's route to it: Traefik takes the new Ingress in with its next rebuild (at
//! most 2 s later), so the page through Traefik is waited for after `success`.

use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::cluster::unique;
use crate::support::eventually;
use crate::support::process::ServeProcess;
use crate::support::world::{SECRET, World, pr, sha};
use crate::tier::{self, REAL_APP, T, host_of};

#[tokio::test]
async fn probing_the_primary_service_by_its_cluster_name_gates_success() {
    let tier = tier::tier();
    let world = World::unstarted("svcprobe", REAL_APP, tier::blueprint(json!({}))).await;
    let dir = std::env::temp_dir().join(unique("cluster-dns"));
    std::fs::create_dir_all(&dir).unwrap();
    let resolv = dir.join("resolv.conf");
    std::fs::write(
        &resolv,
        "nameserver 10.0.0.10\nsearch cluster.local\noptions ndots:5\n",
    )
    .unwrap();
    let wrapper: Vec<String> = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#,
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([resolv.display().to_string()])
    .collect();
    let serve = ServeProcess::start_under(
        &world,
        SECRET,
        &[("SANDCASTLE_PROBE_VIA", "service".into())],
        &wrapper,
    )
    .await;

    let head = sha();
    tier.image_for(&head);
    let d = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b1"));
    let (status, body) = world
        .post_to(serve.addr, d.body.clone(), d.signed_headers(SECRET))
        .await;
    assert_eq!(status, 202, "{body}");
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "svcprobe-pr-1").await;
    eventually("the page through Traefik serves the commit", T, || async {
        let page = tier.get(&host, "/healthz").await;
        match page.commit.as_deref() {
            Some(c) if c == head.as_str() => Ok(()),
            _ => Err(format!("{page:?}")),
        }
    })
    .await;
    let (status, output) = serve.stop_with_status().await;
    assert!(status.success(), "{status}: {output:?}");
}
