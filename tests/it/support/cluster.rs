//! Test access to the real control plane: a client from the harness kubeconfig, uniquely named
//! namespaces per test, condition waits with deadlines, and clean-up.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{Condition, await_condition};
use kube::{Client, Config, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

/// Which control plane a test binary runs against (each binary's root says, as `TIER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // each binary constructs one
pub enum Tier {
    /// kwok's fake nodes: `SANDCASTLE_TEST_KUBECONFIG`, else `KUBECONFIG`.
    Fast,
    /// A node that runs containers behind Traefik: `SANDCASTLE_REAL_KUBECONFIG`.
    Real,
}

fn how_to_start() -> &'static str {
    match crate::TIER {
        Tier::Fast => {
            "start the local control plane first: `eval \"$(scripts/kube-harness start)\"` \
             (or run `scripts/test`, which does it), or point SANDCASTLE_TEST_KUBECONFIG at a cluster"
        }
        Tier::Real => {
            "these tests need the real tier (a node that runs containers, docs/real-tier.md): \
             run `scripts/test`, which starts it, or `scripts/kube-harness start --real` and set \
             SANDCASTLE_REAL_KUBECONFIG to its KUBECONFIG and SANDCASTLE_REAL_HARNESS_DIR to its \
             SANDCASTLE_HARNESS_DIR, with its other lines exported"
        }
    }
}

/// Which kubeconfig the tests use (see [`Tier`]).
pub fn kubeconfig_path() -> String {
    let found = match crate::TIER {
        Tier::Fast => {
            std::env::var("SANDCASTLE_TEST_KUBECONFIG").or_else(|_| std::env::var("KUBECONFIG"))
        }
        Tier::Real => std::env::var("SANDCASTLE_REAL_KUBECONFIG"),
    };
    found.unwrap_or_else(|_| panic!("no kubeconfig for the tests: {}", how_to_start()))
}

/// The kube config every test client is built from, read once.
pub async fn config() -> Config {
    static CONFIG: OnceCell<Config> = OnceCell::const_new();
    CONFIG
        .get_or_init(|| async {
            let path = kubeconfig_path();
            let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| {
                panic!("cannot read kubeconfig {path}: {e}; {}", how_to_start())
            });
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| panic!("invalid kubeconfig {path}: {e}"))
        })
        .await
        .clone()
}

/// A client for the test cluster; fails the test with instructions when the cluster is not there.
pub async fn client() -> Client {
    let config = config().await;
    let url = config.cluster_url.clone();
    let client = Client::try_from(config).expect("building a kube client");
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "the test cluster at {url} does not answer ({e}); {}",
            how_to_start()
        );
    }
    client
}

/// A fresh, uniquely named name for this test run.
pub fn unique(prefix: &str) -> String {
    let suffix: u32 = rand::random::<u32>() % 1_000_000;
    format!("{prefix}-{suffix:06}")
}

/// A namespace owned by one test; deleted (without waiting) when dropped.
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish()
    }
}

impl TestNamespace {
    pub async fn new(client: &Client, prefix: &str) -> Self {
        let name = unique(prefix);
        let api: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        ns.metadata.labels = Some([("sandcastle.dev/test".to_owned(), "true".to_owned())].into());
        api.create(&PostParams::default(), &ns)
            .await
            .expect("creating test namespace");
        Self {
            name,
            client: client.clone(),
        }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

/// Run `cleanup` with a fresh client on a runtime of its own and wait for it: for `Drop`, when
/// the test's runtime is ending and can no longer run tasks.
pub fn clean_up_after_test<F, Fut>(cleanup: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let client = Client::try_from(config().await).unwrap();
            cleanup(client).await;
        });
    })
    .join();
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        // What its pods logged (support::logs); the objects pointing at it go with the namespace.
        let _ = std::fs::remove_dir_all(super::logs::dir(&name));
        // The namespace controller finishes the deletion after the test.
        clean_up_after_test(move |client| async move {
            let api: Api<Namespace> = Api::all(client);
            let _ = api.delete(&name, &DeleteParams::background()).await;
        });
    }
}

/// Wait until `cond` holds for the named object, or fail the test after `timeout`.
pub async fn wait_for<K, C>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: C,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    C: Condition<K>,
{
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(obj)) => obj,
        Ok(Err(e)) => panic!("watching {name} for {what}: {e}"),
        Err(_) => {
            let now = api.get_opt(name).await.ok().flatten();
            panic!("{what}: not true after {timeout:?}; {name} is now: {now:#?}")
        }
    }
}

/// Poll `check` until it returns `Some`, or fail after `timeout` with the last `Err` it gave.
/// For conditions spanning several objects, where a single watch does not fit.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut interval = Duration::from_millis(20);
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: not true after {timeout:?}; last state: {last}")
            }
            Err(_) => {}
        }
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(Duration::from_millis(250));
    }
}
