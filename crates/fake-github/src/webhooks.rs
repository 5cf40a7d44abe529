//! Webhook deliveries consistent with the stand-in's state: each driver method changes the state
//! the way the event would on GitHub and returns the delivery GitHub would send, built from the
//! real payloads in `fixtures/github/` and signed like GitHub signs them.

use rand::Rng as _;
use serde_json::{Value, json};

use super::FakeGitHub;
use super::json::{self, CHECK_RUN, ISSUE_COMMENT, PR_CLOSED, PR_OPENED, PR_SYNCHRONIZE};
use super::state::{CheckRunRecord, CommentRecord, HeadRepo, PullRecord, State, derived_sha};
use sandcastle_domain::{PrNumber, RepoName, Sha};

/// `"sha256=" + hex(HMAC-SHA256(secret, body))`, the `X-Hub-Signature-256` value.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    format!(
        "sha256={}",
        hex::encode(ring::hmac::sign(&key, body).as_ref())
    )
}

/// One webhook delivery: what GitHub POSTs to the App's webhook URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `X-GitHub-Event`.
    pub event: String,
    /// `X-GitHub-Delivery` (a GUID; a redelivery reuses it, so a clone is a redelivery).
    pub id: String,
    /// The exact body bytes that are signed.
    pub body: Vec<u8>,
    pub hook_id: u64,
    pub app_id: u64,
}

impl Delivery {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The headers GitHub sends with it, signed with `secret`.
    pub fn signed_headers(&self, secret: impl AsRef<[u8]>) -> Vec<(&'static str, String)> {
        vec![
            ("content-type", "application/json".to_owned()),
            ("user-agent", "GitHub-Hookshot/49819b1".to_owned()),
            ("x-github-delivery", self.id.clone()),
            ("x-github-event", self.event.clone()),
            ("x-github-hook-id", self.hook_id.to_string()),
            (
                "x-github-hook-installation-target-id",
                self.app_id.to_string(),
            ),
            (
                "x-github-hook-installation-target-type",
                "integration".to_owned(),
            ),
            ("x-hub-signature-256", sign(secret.as_ref(), &self.body)),
        ]
    }
}

fn guid() -> String {
    let b: [u8; 16] = rand::rng().random();
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrSpec {
    pub number: PrNumber,
    pub head_sha: Sha,
    pub head_ref: String,
    pub base_ref: String,
    pub author: String,
    pub title: String,
    pub draft: bool,
    /// `Some(fork)` when the head branch lives in that fork rather than the base repository.
    pub from_fork: Option<RepoName>,
    pub labels: Vec<String>,
    /// The files its first commit changes.
    pub files: Vec<String>,
}

/// The files a commit changes when a test does not say.
pub const DEFAULT_FILES: [&str; 1] = ["src/main.rs"];

impl PrSpec {
    /// A ready, same-repository PR into `main` by `octocat`.
    pub fn new(number: PrNumber, head_sha: Sha, head_ref: &str) -> Self {
        Self {
            number,
            head_sha,
            head_ref: head_ref.to_owned(),
            base_ref: "main".to_owned(),
            author: "octocat".to_owned(),
            title: format!("Pull request #{number}"),
            draft: false,
            from_fork: None,
            labels: Vec::new(),
            files: DEFAULT_FILES.map(str::to_owned).to_vec(),
        }
    }
}

fn set(v: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = v {
        map.insert(key.to_owned(), value);
    }
}

/// A `pull_request` payload from `template`, with the PR, repository, sender and installation
/// of the current state.
fn pull_payload(
    st: &State,
    repo: &RepoName,
    number: u64,
    template: &Value,
    action: &str,
    sender: &str,
) -> Value {
    let rec = st.repo(repo);
    let pr = rec.pull(number);
    let mut v = template.clone();
    set(&mut v, "action", json!(action));
    set(&mut v, "number", json!(number));
    set(
        &mut v,
        "pull_request",
        json::pull(repo, rec, pr, &template["pull_request"]),
    );
    set(&mut v, "repository", json::repo_of(repo, rec));
    set(&mut v, "sender", json::actor(sender));
    set(
        &mut v,
        "installation",
        json::installation_ref(rec.installation),
    );
    v
}

impl FakeGitHub {
    fn deliver(&self, event: &str, payload: &Value) -> Delivery {
        Delivery {
            event: event.to_owned(),
            id: guid(),
            body: serde_json::to_vec(payload).expect("JSON values serialize"),
            hook_id: self.shared.hook_id,
            app_id: self.shared.identity.id,
        }
    }

    /// Changes PR `number` with `change`, stamps `updated_at`, and builds the `pull_request`
    /// delivery for `action`.
    fn change_pull(
        &self,
        repo: &RepoName,
        number: PrNumber,
        template: &Value,
        action: &str,
        change: impl FnOnce(&mut PullRecord) -> (String, Vec<(&'static str, Value)>),
    ) -> Delivery {
        let payload = self.with(|st| {
            let now = st.tick();
            let rec = st.repo_mut(repo);
            let pr = rec
                .pulls
                .get_mut(&number.get())
                .unwrap_or_else(|| panic!("no pull request #{number} in {repo}"));
            pr.updated_at = now;
            let (sender, extra) = change(pr);
            let mut v = pull_payload(st, repo, number.get(), template, action, &sender);
            for (k, value) in extra {
                set(&mut v, k, value);
            }
            v
        });
        self.deliver("pull_request", &payload)
    }

    /// Opens a pull request (`pull_request` / `opened`).
    pub fn open_pull_request(&self, repo: &RepoName, spec: PrSpec) -> Delivery {
        let payload = self.with(|st| {
            let id = st.id();
            let now = st.tick();
            let rec = st.repo_mut(repo);
            assert!(
                !rec.pulls.contains_key(&spec.number.get()),
                "pull request #{} already exists in {repo}",
                spec.number
            );
            let base_sha = rec
                .refs
                .get(&spec.base_ref)
                .cloned()
                .unwrap_or_else(|| derived_sha(&format!("{repo}@{}", spec.base_ref)));
            rec.set_ref(&spec.base_ref, &base_sha);
            let head_repo = match spec.from_fork {
                Some(fork) => HeadRepo::Fork(fork),
                None => {
                    rec.set_ref(&spec.head_ref, &spec.head_sha);
                    HeadRepo::Same
                }
            };
            rec.shas.insert(spec.head_sha.clone());
            let commits = vec![(spec.head_sha.clone(), spec.files)];
            rec.pulls.insert(
                spec.number.get(),
                PullRecord {
                    number: spec.number.get(),
                    id,
                    title: spec.title,
                    author: spec.author.clone(),
                    head_sha: spec.head_sha,
                    head_ref: spec.head_ref,
                    head_repo,
                    base_ref: spec.base_ref,
                    base_sha,
                    draft: spec.draft,
                    open: true,
                    merged: false,
                    merge_commit_sha: None,
                    merged_by: None,
                    labels: spec.labels,
                    created_at: now,
                    updated_at: now,
                    closed_at: None,
                    merged_at: None,
                    commits,
                },
            );
            pull_payload(
                st,
                repo,
                spec.number.get(),
                &PR_OPENED,
                "opened",
                &spec.author,
            )
        });
        self.deliver("pull_request", &payload)
    }

    /// Pushes `new_sha` to the PR's head branch (`synchronize`, with `before` and `after`),
    /// a commit changing [`DEFAULT_FILES`].
    pub fn push(&self, repo: &RepoName, number: PrNumber, new_sha: &Sha) -> Delivery {
        self.push_files(repo, number, new_sha, &DEFAULT_FILES)
    }

    /// [`FakeGitHub::push`] of a commit changing `files`.
    pub fn push_files(
        &self,
        repo: &RepoName,
        number: PrNumber,
        new_sha: &Sha,
        files: &[&str],
    ) -> Delivery {
        let new_sha = new_sha.clone();
        let files: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
        self.with(|st| {
            let rec = st.repo_mut(repo);
            let pr = rec.pull(number.get()).clone();
            rec.shas.insert(new_sha.clone());
            if pr.head_repo == HeadRepo::Same {
                rec.set_ref(&pr.head_ref, &new_sha);
            }
        });
        self.change_pull(repo, number, &PR_SYNCHRONIZE, "synchronize", |pr| {
            let before = std::mem::replace(&mut pr.head_sha, new_sha.clone());
            pr.commits.push((new_sha.clone(), files));
            (
                pr.author.clone(),
                vec![("before", json!(before)), ("after", json!(new_sha))],
            )
        })
    }

    /// Closes the PR, merged or not (`closed`); the repository owner does it.
    pub fn close(&self, repo: &RepoName, number: PrNumber, merged: bool) -> Delivery {
        let owner = repo.owner().to_owned();
        self.change_pull(repo, number, &PR_CLOSED, "closed", |pr| {
            pr.open = false;
            pr.closed_at = Some(pr.updated_at);
            if merged {
                pr.merged = true;
                pr.merged_at = Some(pr.updated_at);
                pr.merged_by = Some(owner.clone());
                pr.merge_commit_sha = Some(derived_sha(&format!("merge {}", pr.head_sha)));
            }
            (owner, Vec::new())
        })
    }

    /// Reopens a closed, unmerged PR (`reopened`).
    pub fn reopen(&self, repo: &RepoName, number: PrNumber) -> Delivery {
        let owner = repo.owner().to_owned();
        self.change_pull(repo, number, &PR_OPENED, "reopened", |pr| {
            assert!(!pr.merged, "a merged pull request cannot be reopened");
            pr.open = true;
            pr.closed_at = None;
            (owner, Vec::new())
        })
    }

    /// Marks a draft ready (`ready_for_review`).
    pub fn ready_for_review(&self, repo: &RepoName, number: PrNumber) -> Delivery {
        self.change_pull(repo, number, &PR_OPENED, "ready_for_review", |pr| {
            pr.draft = false;
            (pr.author.clone(), Vec::new())
        })
    }

    /// Turns the PR back into a draft (`converted_to_draft`).
    pub fn convert_to_draft(&self, repo: &RepoName, number: PrNumber) -> Delivery {
        self.change_pull(repo, number, &PR_OPENED, "converted_to_draft", |pr| {
            pr.draft = true;
            (pr.author.clone(), Vec::new())
        })
    }

    /// Adds a label (`labeled`, with a top-level `label`).
    pub fn label(&self, repo: &RepoName, number: PrNumber, name: &str) -> Delivery {
        let owner = repo.owner().to_owned();
        let label = json::labels(repo, &[name.to_owned()])[0].clone();
        self.change_pull(repo, number, &PR_OPENED, "labeled", |pr| {
            if !pr.labels.iter().any(|l| l == name) {
                pr.labels.push(name.to_owned());
            }
            (owner, vec![("label", label)])
        })
    }

    /// Removes a label (`unlabeled`, with a top-level `label`).
    pub fn unlabel(&self, repo: &RepoName, number: PrNumber, name: &str) -> Delivery {
        let owner = repo.owner().to_owned();
        let label = json::labels(repo, &[name.to_owned()])[0].clone();
        self.change_pull(repo, number, &PR_OPENED, "unlabeled", |pr| {
            pr.labels.retain(|l| l != name);
            (owner, vec![("label", label)])
        })
    }

    /// `user` comments `body` on the PR conversation (`issue_comment` / `created`, whose `issue`
    /// has a `pull_request` key).
    pub fn comment(&self, repo: &RepoName, number: PrNumber, user: &str, body: &str) -> Delivery {
        let id = self.with(|st| {
            let id = st.id();
            let now = st.tick();
            let rec = st.repo_mut(repo);
            rec.pull(number.get());
            rec.comments.push(CommentRecord {
                id,
                issue: number.get(),
                body: body.to_owned(),
                user: user.to_owned(),
                by_app: false,
                created_at: now,
                updated_at: now,
                reactions: Vec::new(),
            });
            id
        });
        self.comment_delivery(repo, id, "created", user, None)
    }

    /// `user` (who may edit others' comments, like a maintainer) replaces the body of comment `id`
    /// (`issue_comment` / `edited`, with `changes.body.from`).
    pub fn edit_comment(&self, repo: &RepoName, id: u64, user: &str, body: &str) -> Delivery {
        let before = self.with(|st| {
            let now = st.tick();
            let c = st
                .repo_mut(repo)
                .comments
                .iter_mut()
                .find(|c| c.id == id)
                .unwrap_or_else(|| panic!("no comment {id} in {repo}"));
            c.updated_at = now;
            std::mem::replace(&mut c.body, body.to_owned())
        });
        self.comment_delivery(repo, id, "edited", user, Some(before))
    }

    /// `user` deletes comment `id` (`issue_comment` / `deleted`).
    pub fn delete_comment(&self, repo: &RepoName, id: u64, user: &str) -> Delivery {
        let delivery = self.comment_delivery(repo, id, "deleted", user, None);
        self.with(|st| st.repo_mut(repo).comments.retain(|c| c.id != id));
        delivery
    }

    fn comment_delivery(
        &self,
        repo: &RepoName,
        id: u64,
        action: &str,
        sender: &str,
        from: Option<String>,
    ) -> Delivery {
        let identity = self.shared.identity.clone();
        let payload = self.with(|st| {
            let rec = st.repo(repo);
            let comment = rec
                .comments
                .iter()
                .find(|c| c.id == id)
                .unwrap_or_else(|| panic!("no comment {id} in {repo}"));
            let mut v = ISSUE_COMMENT.clone();
            set(&mut v, "action", json!(action));
            set(
                &mut v,
                "issue",
                json::issue(repo, rec, rec.pull(comment.issue)),
            );
            set(
                &mut v,
                "comment",
                json::comment(repo, rec, comment, &identity),
            );
            if let Some(from) = from {
                set(&mut v, "changes", json!({"body": {"from": from}}));
            }
            set(&mut v, "repository", json::repo_of(repo, rec));
            set(&mut v, "sender", json::actor(sender));
            set(
                &mut v,
                "installation",
                json::installation_ref(rec.installation),
            );
            v
        });
        self.deliver("issue_comment", &payload)
    }

    /// Completes the check run `name` on `sha` (creating it if needed) with `conclusion`
    /// (`success`, `failure`, …): `check_run` / `completed`.
    pub fn complete_check_run(
        &self,
        repo: &RepoName,
        sha: &Sha,
        name: &str,
        conclusion: &str,
    ) -> Delivery {
        let payload = self.with(|st| {
            let id = st.id();
            let now = st.tick();
            let rec = st.repo_mut(repo);
            rec.shas.insert(sha.clone());
            let index = match rec
                .check_runs
                .iter()
                .rposition(|r| &r.sha == sha && r.name == name)
            {
                Some(i) => i,
                None => {
                    rec.check_runs
                        .push(CheckRunRecord::seeded(id, sha, name, now));
                    rec.check_runs.len() - 1
                }
            };
            let run = &mut rec.check_runs[index];
            run.status = "completed".to_owned();
            run.conclusion = Some(conclusion.to_owned());
            run.completed_at = Some(now);
            run.steps.push(format!("completed/{conclusion}"));
            let rec = st.repo(repo);
            let mut v = CHECK_RUN.clone();
            set(&mut v, "action", json!("completed"));
            set(
                &mut v,
                "check_run",
                json::check_run(repo, rec, &rec.check_runs[index]),
            );
            set(&mut v, "repository", json::repo_of(repo, rec));
            set(&mut v, "sender", json::actor(repo.owner()));
            set(
                &mut v,
                "installation",
                json::installation_ref(rec.installation),
            );
            v
        });
        self.deliver("check_run", &payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_documented_signature_vector() {
        assert_eq!(
            sign(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn real_capture_signatures_verify() {
        // The published secret of the project the captures come from (fixtures/github/README.md).
        let secret = b"402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b";
        let body = include_bytes!("../../../fixtures/github/pull_request.opened.json");
        let capture: Value = serde_json::from_str(include_str!(
            "../../../fixtures/github/pull_request.opened.delivery.json"
        ))
        .unwrap();
        assert_eq!(
            capture["headers"]["x-hub-signature-256"].as_str(),
            Some(sign(secret, body).as_str())
        );
    }

    #[test]
    fn delivery_guids_look_like_githubs() {
        let g = guid();
        assert_eq!(g.len(), 36);
        assert_eq!(g.matches('-').count(), 4);
    }
}
