//! The controller's own status writes, by the resource version each made, so that their echo on
//! the watch does not start another pass over the preview: the pass that wrote a status already
//! decided on it and said when to look again. Any other change (the spec, an annotation, a
//! label, a status another writer cleared) has another version and starts a pass as before.
//! Data only, no I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use kube::ResourceExt;

use sandcastle_crd::PreviewEnvironment;

/// Versions kept per preview: a pass may write twice (a slot taken under the admission lock,
/// then its verdict), and the first write's echo can arrive after the second is made.
const KEPT: usize = 4;

/// The resource versions of each preview's last status writes by this process.
#[derive(Debug, Default)]
pub(crate) struct Echoes {
    written: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Echoes {
    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This process wrote preview `name`'s status, making `version` (`None`: it is gone).
    pub(crate) fn wrote(&self, name: &str, version: Option<String>) {
        let mut written = self.written();
        let Some(version) = version else {
            written.remove(name);
            return;
        };
        let versions = written.entry(name.to_owned()).or_default();
        versions.push_back(version);
        if versions.len() > KEPT {
            versions.pop_front();
        }
    }

    /// Whether `pe`, as the watch shows it, is exactly one of this process's last status writes.
    pub(crate) fn is_own(&self, pe: &PreviewEnvironment) -> bool {
        let Some(version) = pe.resource_version() else {
            return false;
        };
        self.written()
            .get(&pe.name_any())
            .is_some_and(|versions| versions.contains(&version))
    }

    /// Forget a preview that is gone.
    pub(crate) fn forget(&self, name: &str) {
        self.written().remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> PreviewEnvironment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "shop-pr-1", "resourceVersion": version},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "main",
                "sha": "0123456789012345678901234567890123456789",
                "requestedBy": {"kind": "github-user", "name": "maria"}}
        }))
        .unwrap()
    }

    #[test]
    fn only_the_version_this_process_last_wrote_is_its_own_echo() {
        let echoes = Echoes::default();
        assert!(!echoes.is_own(&at("10")), "nothing written yet");
        echoes.wrote("shop-pr-1", Some("10".into()));
        assert!(echoes.is_own(&at("10")));
        assert!(
            !echoes.is_own(&at("11")),
            "a later change by anyone is news"
        );
        echoes.wrote("shop-pr-1", Some("12".into()));
        assert!(
            echoes.is_own(&at("10")),
            "a pass's first write, echoed after its second"
        );
        assert!(echoes.is_own(&at("12")));
        for v in 13..=16 {
            echoes.wrote("shop-pr-1", Some(v.to_string()));
        }
        assert!(!echoes.is_own(&at("12")), "only the last few are kept");
        assert!(echoes.is_own(&at("16")));
        echoes.wrote("shop-pr-1", None);
        assert!(!echoes.is_own(&at("16")), "gone");
        echoes.wrote("shop-pr-1", Some("13".into()));
        echoes.forget("shop-pr-1");
        assert!(!echoes.is_own(&at("13")));
        let mut unversioned = at("13");
        unversioned.metadata.resource_version = None;
        assert!(!echoes.is_own(&unversioned));
    }
}
