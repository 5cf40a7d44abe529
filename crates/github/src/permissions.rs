//! Who may run `/preview` commands: people (and bots, and agents acting through an App) with
//! write, maintain or admin permission on the repository, as GitHub's collaborator-permission API
//! reports it — never guessed from `author_association`. Answers are kept briefly per repository
//! and user, so a burst of commands costs one call.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::client::{GitHubError, Installation, Permission};
use sandcastle_domain::RepoName;

/// How long an answer is trusted.
pub const TTL: Duration = Duration::from_secs(60);
/// Entries kept at most; expired ones are dropped first when it is reached.
const CAPACITY: usize = 4096;

/// Recent permission answers, per repository and (case-insensitive) login.
#[derive(Debug)]
pub struct PermissionCache {
    ttl: Duration,
    entries: Mutex<HashMap<(RepoName, String), (Permission, Instant)>>,
}

impl Default for PermissionCache {
    fn default() -> Self {
        Self::new(TTL)
    }
}

impl PermissionCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    fn lookup(&self, key: &(RepoName, String), now: Instant) -> Option<Permission> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(_, at)| now.duration_since(*at) < self.ttl)
            .map(|(p, _)| *p)
    }

    fn remember(&self, key: (RepoName, String), permission: Permission, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY {
            let ttl = self.ttl;
            entries.retain(|_, (_, at)| now.duration_since(*at) < ttl);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (permission, now));
    }

    /// `user`'s permission on `repo`, from the cache or from GitHub. Errors are not cached.
    pub async fn get(
        &self,
        gh: &Installation,
        repo: &RepoName,
        user: &str,
    ) -> Result<Permission, GitHubError> {
        let key = (repo.clone(), user.to_ascii_lowercase());
        if let Some(p) = self.lookup(&key, Instant::now()) {
            return Ok(p);
        }
        let p = gh.collaborator_permission(repo, user).await?;
        self.remember(key, p, Instant::now());
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_expire_and_logins_ignore_case() {
        let cache = PermissionCache::new(Duration::from_secs(60));
        let repo = RepoName::new("acme/shop").unwrap();
        let t0 = Instant::now();
        cache.remember((repo.clone(), "octocat".into()), Permission::Write, t0);
        let key = (repo, "OctoCat".to_ascii_lowercase());
        assert_eq!(cache.lookup(&key, t0), Some(Permission::Write));
        assert_eq!(
            cache.lookup(&key, t0 + Duration::from_secs(59)),
            Some(Permission::Write)
        );
        assert_eq!(cache.lookup(&key, t0 + Duration::from_secs(60)), None);
        let other = (RepoName::new("acme/web").unwrap(), "octocat".into());
        assert_eq!(cache.lookup(&other, t0), None, "per repository");
    }

    #[test]
    fn the_cache_stays_bounded() {
        let cache = PermissionCache::new(Duration::from_secs(60));
        let repo = RepoName::new("acme/shop").unwrap();
        let t0 = Instant::now();
        for i in 0..CAPACITY + 10 {
            cache.remember((repo.clone(), format!("user{i}")), Permission::Read, t0);
        }
        assert!(cache.entries.lock().unwrap().len() <= CAPACITY);
    }
}
