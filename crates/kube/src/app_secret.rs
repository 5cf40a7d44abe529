//! The GitHub App's credentials as the setup flow stores them: one Secret in Sandcastle's
//! namespace (`sandcastle-github-app`) with the App id and slug, its private key, webhook secret
//! and OAuth client. Created once (a second setup is refused unless forced), read at start-up
//! and looked at again every few seconds, so `sandcastle serve` starts using a new App without
//! a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use sandcastle_domain::Secret;

/// The Secret's name.
pub const NAME: &str = "sandcastle-github-app";

/// The App's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppCredentials {
    pub app_id: u64,
    pub slug: String,
    pub private_key: Secret,
    pub webhook_secret: Secret,
    pub client_id: String,
    pub client_secret: Secret,
}

/// Why storing failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "an App is configured already (Secret {NAME}); replace it with `sandcastle setup --force`"
    )]
    Exists,
    #[error(transparent)]
    Api(#[from] kube::Error),
}

fn field(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key)
        .and_then(|v| String::from_utf8(v.0.clone()).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The credentials in `secret`, when it holds them all.
pub fn credentials(secret: &KubeSecret) -> Option<AppCredentials> {
    let data = secret.data.as_ref()?;
    Some(AppCredentials {
        app_id: field(data, "app-id")?.parse().ok()?,
        slug: field(data, "slug").unwrap_or_default(),
        private_key: Secret::new(field(data, "private-key.pem")?),
        webhook_secret: Secret::new(field(data, "webhook-secret")?),
        client_id: field(data, "client-id").unwrap_or_default(),
        client_secret: Secret::new(field(data, "client-secret").unwrap_or_default()),
    })
}

fn secret_of(creds: &AppCredentials) -> KubeSecret {
    let entry = |k: &str, v: &str| (k.to_owned(), ByteString(v.as_bytes().to_vec()));
    KubeSecret {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "sandcastle".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([
            entry("app-id", &creds.app_id.to_string()),
            entry("slug", &creds.slug),
            entry("private-key.pem", creds.private_key.expose()),
            entry("webhook-secret", creds.webhook_secret.expose()),
            entry("client-id", &creds.client_id),
            entry("client-secret", creds.client_secret.expose()),
        ])),
        ..KubeSecret::default()
    }
}

/// Make the App (`convert` spends GitHub's one-time manifest code; it gives the credentials and
/// whatever else the caller wants of the answer) and store it, refusing before the code is spent
/// when an App is stored already and `force` is not given.
pub async fn adopt<F, Fut, T, E>(
    client: &Client,
    namespace: &str,
    force: bool,
    convert: F,
) -> Result<(AppCredentials, T), AdoptError<E>>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(AppCredentials, T), E>>,
    E: std::error::Error + 'static,
{
    if !force && read(client, namespace).await?.is_some() {
        return Err(AdoptError::Store(StoreError::Exists));
    }
    let (creds, rest) = convert().await.map_err(AdoptError::Convert)?;
    store(client, namespace, &creds, force).await?;
    Ok((creds, rest))
}

/// Why [`adopt`] failed: the conversion, or storing.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Convert(E),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl<E: std::error::Error + 'static> From<kube::Error> for AdoptError<E> {
    fn from(e: kube::Error) -> Self {
        Self::Store(StoreError::Api(e))
    }
}

/// The stored credentials and the Secret's resourceVersion, if any.
pub async fn read(
    client: &Client,
    namespace: &str,
) -> Result<Option<(AppCredentials, String)>, kube::Error> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), namespace);
    Ok(api.get_opt(NAME).await?.and_then(|s| {
        let version = s.metadata.resource_version.clone().unwrap_or_default();
        credentials(&s).map(|c| (c, version))
    }))
}

/// Store `creds`: created when none are (refused when some are), replaced when `force`.
pub async fn store(
    client: &Client,
    namespace: &str,
    creds: &AppCredentials,
    force: bool,
) -> Result<(), StoreError> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), namespace);
    let secret = secret_of(creds);
    if force {
        api.patch(
            NAME,
            &PatchParams::apply("sandcastle-setup").force(),
            &Patch::Apply(&secret),
        )
        .await?;
        return Ok(());
    }
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 409 => Err(StoreError::Exists),
        Err(e) => Err(e.into()),
    }
}

/// Wait until the stored credentials differ from `seen` (a resourceVersion; `None`: until there
/// are any). Polls: the Secret is read once every `every`.
pub async fn changed(client: &Client, namespace: &str, seen: Option<&str>, every: Duration) {
    loop {
        match read(client, namespace).await {
            Ok(Some((_, version))) if Some(version.as_str()) != seen => return,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reading the App's credentials failed"),
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_round_trip_through_their_secret() {
        let creds = AppCredentials {
            app_id: 42,
            slug: "acme-sandcastle".into(),
            private_key: Secret::new(
                "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----",
            ),
            webhook_secret: Secret::new("whsec"),
            client_id: "Iv23li".into(),
            client_secret: Secret::new("cs"),
        };
        assert_eq!(credentials(&secret_of(&creds)), Some(creds));
        assert_eq!(credentials(&KubeSecret::default()), None);
    }
}
