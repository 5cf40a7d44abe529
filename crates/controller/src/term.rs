//! What this leadership term knows of GitHub. Memory, never the record (that is each
//! preview's status); it lets the usual path skip reads and keeps faults from doubling writes:
//!
//! - **What each deployment shows**: the state this term last posted there or read from there.
//!   A status is posted only when it would change what the deployment shows; a deployment not
//!   seen in this term is read first (one call). A leader killed after posting a status but
//!   before recording it leaves the record behind GitHub, and its successor must not post that
//!   status a second time.
//! - **What this term created** (deployments, sticky comments, test check runs), so a pass whose status write
//!   failed uses them instead of creating them again.
//! - **Which previews are fresh**: those this term gave their finalizer. That is the first pass of
//!   a preview's life, and nothing is posted to GitHub for it before (a deployment or a sticky
//!   comment needs a phase, which is set only once the finalizer is in place), so no other leader can have posted anything
//!   for them: the lookups that find what a crashed leader made (a deployment of the commit, the
//!   comment carrying the marker) are skipped, two GitHub calls fewer per pull request. No clock
//!   is involved. A sticky comment is only created without a lookup for a preview whose one
//!   request is its pull request's `opened` (not an approved fork's, whose waiting preview may
//!   have commented before it had a finalizer; no earlier preview of the same name can have
//!   commented on a pull request just opened).
//!
//! Each term starts empty: another leader may have posted anything in between.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kube::ResourceExt;

use sandcastle_crd::PreviewEnvironment;
use sandcastle_domain::RepoName;
use sandcastle_github::client::{DeploymentState, GitHubError, Installation, NewStatus};

/// The action a pull request's `opened` delivery records on the preview it makes.
const OPENED: &str = "pull-request-opened";

/// One leadership term's memory.
#[derive(Debug, Default)]
pub struct Term {
    pub shown: Shown,
    /// Uids of the previews this term gave their finalizer.
    fresh: Mutex<HashSet<String>>,
    /// (preview uid, incarnation, commit) → the deployment this term created.
    deployments: Mutex<HashMap<(String, u32, String), u64>>,
    /// Preview uid → the sticky comment this term created.
    stickies: Mutex<HashMap<String, u64>>,
    /// (preview uid, a test run's external id) → the check run this term created.
    check_runs: Mutex<HashMap<(String, String), u64>>,
}

impl Term {
    /// Records that this term gave `pe` its finalizer.
    pub fn finalized(&self, pe: &PreviewEnvironment) {
        if let Some(uid) = pe.uid() {
            let mut fresh = self.fresh.lock().unwrap();
            if fresh.len() >= CAP {
                fresh.clear();
            }
            fresh.insert(uid);
        }
    }

    /// Whether this term gave `pe` its finalizer, so no other leader has posted anything for it.
    pub fn fresh(&self, pe: &PreviewEnvironment) -> bool {
        pe.uid()
            .is_some_and(|uid| self.fresh.lock().unwrap().contains(&uid))
    }

    /// Whether `pe` is fresh and its one request is its pull request's `opened`.
    pub fn fresh_pull_request(&self, pe: &PreviewEnvironment) -> bool {
        let requests = sandcastle_kube::events::requests_of(pe);
        self.fresh(pe) && matches!(&requests[..], [only] if only.action == OPENED)
    }

    /// The deployment this term created for `pe`'s current incarnation at `sha`.
    pub fn deployment(&self, pe: &PreviewEnvironment, sha: &str) -> Option<u64> {
        let key = (pe.uid()?, pe.spec.incarnation, sha.to_owned());
        self.deployments.lock().unwrap().get(&key).copied()
    }

    pub fn created_deployment(&self, pe: &PreviewEnvironment, sha: &str, id: u64) {
        if let Some(uid) = pe.uid() {
            bounded_insert(
                &mut self.deployments.lock().unwrap(),
                (uid, pe.spec.incarnation, sha.to_owned()),
                id,
            );
        }
        self.shown.set(id, None);
    }

    /// The sticky comment this term created for `pe`.
    pub fn sticky(&self, pe: &PreviewEnvironment) -> Option<u64> {
        self.stickies.lock().unwrap().get(&pe.uid()?).copied()
    }

    pub fn created_sticky(&self, pe: &PreviewEnvironment, id: u64) {
        if let Some(uid) = pe.uid() {
            bounded_insert(&mut self.stickies.lock().unwrap(), uid, id);
        }
    }

    /// The check run this term created for `pe`'s test run `external_id`.
    pub fn check_run(&self, pe: &PreviewEnvironment, external_id: &str) -> Option<u64> {
        let key = (pe.uid()?, external_id.to_owned());
        self.check_runs.lock().unwrap().get(&key).copied()
    }

    pub fn created_check_run(&self, pe: &PreviewEnvironment, external_id: &str, id: u64) {
        if let Some(uid) = pe.uid() {
            bounded_insert(
                &mut self.check_runs.lock().unwrap(),
                (uid, external_id.to_owned()),
                id,
            );
        }
    }
}

/// Inserts, starting the map over first when it is full.
fn bounded_insert<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, key: K, value: V) {
    if map.len() >= CAP && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
}

/// Entries remembered at most in each map; past that it starts over (each is read once more).
const CAP: usize = 4096;

/// Deployment id → the state GitHub shows (`None`: no status yet).
#[derive(Debug, Default)]
pub struct Shown(Mutex<HashMap<u64, Option<DeploymentState>>>);

impl Shown {
    /// What deployment `id` shows, if this process knows.
    pub fn get(&self, id: u64) -> Option<Option<DeploymentState>> {
        self.0.lock().unwrap().get(&id).copied()
    }

    /// Records what deployment `id` shows now.
    pub fn set(&self, id: u64, state: Option<DeploymentState>) {
        bounded_insert(&mut self.0.lock().unwrap(), id, state);
    }

    /// Posts `status` on deployment `id` unless GitHub already shows its state there; returns
    /// whether it posted.
    pub async fn post(
        &self,
        gh: &Installation,
        repo: &RepoName,
        id: u64,
        status: &NewStatus,
    ) -> Result<bool, GitHubError> {
        let shown = match self.get(id) {
            Some(known) => known,
            None => gh
                .list_deployment_statuses(repo, id)
                .await?
                .first()
                .map(|s| s.state),
        };
        if shown == Some(status.state) {
            self.set(id, shown);
            return Ok(false);
        }
        gh.create_deployment_status(repo, id, status).await?;
        self.set(id, Some(status.state));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_bounded_and_starts_over() {
        let shown = Shown::default();
        for id in 0..CAP as u64 {
            shown.set(id, None);
        }
        assert_eq!(shown.get(7), Some(None));
        shown.set(7, Some(DeploymentState::Success));
        assert_eq!(shown.get(7), Some(Some(DeploymentState::Success)));
        shown.set(CAP as u64, Some(DeploymentState::Inactive));
        assert_eq!(shown.get(7), None, "forgotten: read again when needed");
        assert_eq!(shown.get(CAP as u64), Some(Some(DeploymentState::Inactive)));
    }
}
