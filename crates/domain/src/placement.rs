//! Where a new preview goes: the cluster names, what Sandcastle knows of each target cluster
//! (reachable, its credentials' access, its cap, the previews it holds), the choice of the one
//! with the most room, and — when none can take the preview — why, per cluster, in words
//! people read on the pull request. Pure: the controller brings the facts.

use std::fmt;

use super::NamespaceName;

/// Sandcastle's own cluster's name, always available.
pub const IN_CLUSTER: &str = sandcastle_crd::IN_CLUSTER;

/// The cluster a preview's status says it lives in: its placement, or Sandcastle's own for one
/// placed before placements were recorded (it has a namespace). `None`: not placed.
pub fn placed_in(st: &sandcastle_crd::PreviewStatus) -> Option<&str> {
    match (&st.cluster, &st.namespace) {
        (Some(c), _) => Some(c),
        (None, Some(_)) => Some(IN_CLUSTER),
        (None, None) => None,
    }
}

/// A cluster's name: a DNS label (`in-cluster` is Sandcastle's own).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(String);

impl ClusterName {
    pub fn new(s: &str) -> Result<Self, String> {
        NamespaceName::new(s).map_err(|_| {
            format!(
                "{s:?} is not a valid cluster name (a DNS label: a-z, 0-9 and '-', at most 63 characters)"
            )
        })?;
        Ok(Self(s.to_owned()))
    }

    pub fn in_cluster() -> Self {
        Self(IN_CLUSTER.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_local(&self) -> bool {
        self.0 == IN_CLUSTER
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What Sandcastle knows of a cluster right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Reachable, with every permission previews need.
    Ready,
    /// Registered, not checked yet.
    Checking,
    /// Its API did not answer (the error, for people).
    Unreachable(String),
    /// Its credentials lack these permissions (`create networking.k8s.io/networkpolicies`).
    Lacks(Vec<String>),
    /// Its Secret cannot be used (why).
    Invalid(String),
    /// No Secret registers it.
    Unregistered,
}

impl Standing {
    /// Whether waiting may help (as opposed to an admin having to fix something).
    pub fn passing(&self) -> bool {
        matches!(self, Self::Ready | Self::Checking | Self::Unreachable(_))
    }
}

/// One target cluster as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: ClusterName,
    pub standing: Standing,
    /// Most previews it holds (`None`: no cap).
    pub cap: Option<u32>,
    /// Previews it holds now.
    pub previews: u32,
}

impl Candidate {
    /// Room left: `None` without a cap.
    fn room(&self) -> Option<u32> {
        self.cap.map(|c| c.saturating_sub(self.previews))
    }
}

/// Why one cluster cannot take the preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub cluster: ClusterName,
    pub why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Standing(Standing),
    Full { previews: u32, cap: u32 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.cluster;
        match &self.why {
            Why::Full { previews, cap } => write!(f, "{c} is full ({previews}/{cap} previews)"),
            Why::Standing(Standing::Checking) => write!(f, "{c} is being checked"),
            Why::Standing(Standing::Unreachable(e)) => write!(f, "{c} is unreachable ({e})"),
            Why::Standing(Standing::Lacks(missing)) => {
                write!(f, "the credentials of {c} lack {}", missing_list(missing))
            }
            Why::Standing(Standing::Invalid(e)) => {
                write!(f, "the Secret of {c} cannot be used: {e}")
            }
            Why::Standing(Standing::Unregistered) => write!(
                f,
                "{c} is not registered (no Secret labelled sandcastle.dev/cluster={c})"
            ),
            Why::Standing(Standing::Ready) => write!(f, "{c} is ready"),
        }
    }
}

/// At most this many missing permissions are named; the rest are counted.
const NAMED: usize = 3;

fn missing_list(missing: &[String]) -> String {
    let mut out = missing
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if missing.len() > NAMED {
        out.push_str(&format!(" and {} more", missing.len() - NAMED));
    }
    out
}

/// No target cluster can take the preview: why, cluster by cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoom(pub Vec<Refusal>);

impl NoRoom {
    /// Whether waiting may help: some cluster is only full, unreachable or being checked.
    /// Otherwise (every one misconfigured) the preview fails until an admin fixes one.
    pub fn may_clear(&self) -> bool {
        self.0.iter().any(|r| match &r.why {
            Why::Full { .. } => true,
            Why::Standing(s) => s.passing(),
        })
    }
}

impl NoRoom {
    /// Whether some cluster's credentials lack permissions (the admin's fix is the documented
    /// ClusterRole).
    pub fn lacks_access(&self) -> bool {
        self.0
            .iter()
            .any(|r| matches!(r.why, Why::Standing(Standing::Lacks(_))))
    }
}

impl fmt::Display for NoRoom {
    /// Each cluster's reason, `; ` between them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let each: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&each.join("; "))
    }
}

/// The cluster a new preview goes to: among those ready and not full, the one with the most
/// room (a cluster without a cap has all the room there is); then the one holding fewest
/// previews; then the first listed.
pub fn place(candidates: &[Candidate]) -> Result<ClusterName, NoRoom> {
    let mut refusals = Vec::new();
    let mut best: Option<&Candidate> = None;
    for c in candidates {
        if c.standing != Standing::Ready {
            refusals.push(Refusal {
                cluster: c.name.clone(),
                why: Why::Standing(c.standing.clone()),
            });
            continue;
        }
        if let (Some(0), Some(cap)) = (c.room(), c.cap) {
            refusals.push(Refusal {
                cluster: c.name.clone(),
                why: Why::Full {
                    previews: c.previews,
                    cap,
                },
            });
            continue;
        }
        let better = best.is_none_or(|b| {
            let more_room = match (c.room(), b.room()) {
                (None, Some(_)) => true,
                (Some(x), Some(y)) => x > y,
                _ => false,
            };
            let same_room = c.room() == b.room();
            more_room || (same_room && c.previews < b.previews)
        });
        if better {
            best = Some(c);
        }
    }
    best.map(|c| c.name.clone()).ok_or(NoRoom(refusals))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, standing: Standing, cap: Option<u32>, previews: u32) -> Candidate {
        Candidate {
            name: ClusterName::new(name).unwrap(),
            standing,
            cap,
            previews,
        }
    }

    fn placed(candidates: &[Candidate]) -> String {
        place(candidates).unwrap().to_string()
    }

    #[test]
    fn the_cluster_with_the_most_room_wins_then_the_emptiest_then_the_first() {
        use Standing::Ready;
        assert_eq!(
            placed(&[c("b", Ready, Some(2), 1), c("c", Ready, Some(5), 3)]),
            "c",
            "2 free beats 1 free"
        );
        assert_eq!(
            placed(&[c("b", Ready, Some(2), 0), c("c", Ready, Some(4), 2)]),
            "b",
            "same room: fewer previews"
        );
        assert_eq!(
            placed(&[c("b", Ready, Some(2), 1), c("c", Ready, Some(2), 1)]),
            "b",
            "a tie: the first listed"
        );
        assert_eq!(
            placed(&[c("b", Ready, Some(100), 0), c("c", Ready, None, 40)]),
            "c",
            "no cap is all the room there is"
        );
        assert_eq!(
            placed(&[c("b", Ready, None, 3), c("c", Ready, None, 2)]),
            "c"
        );
    }

    #[test]
    fn five_previews_over_two_clusters_of_two_fill_them_in_turn_and_queue_the_fifth() {
        let mut counts = [0u32, 0];
        let mut went = Vec::new();
        for _ in 0..5 {
            let cands = [
                c("b", Standing::Ready, Some(2), counts[0]),
                c("c", Standing::Ready, Some(2), counts[1]),
            ];
            match place(&cands) {
                Ok(name) => {
                    counts[usize::from(name.as_str() == "c")] += 1;
                    went.push(name.to_string());
                }
                Err(no) => went.push(no.to_string()),
            }
        }
        assert_eq!(
            went,
            [
                "b",
                "c",
                "b",
                "c",
                "b is full (2/2 previews); c is full (2/2 previews)"
            ]
        );
    }

    #[test]
    fn unreachable_and_misconfigured_clusters_are_skipped_and_said_why() {
        let lacks = Standing::Lacks(vec![
            "create networkpolicies.networking.k8s.io".into(),
            "delete networkpolicies.networking.k8s.io".into(),
            "create namespaces".into(),
            "delete namespaces".into(),
        ]);
        let cands = [
            c(
                "b",
                Standing::Unreachable("connection refused".into()),
                None,
                0,
            ),
            c("c", lacks.clone(), None, 0),
            c("d", Standing::Ready, Some(1), 0),
        ];
        assert_eq!(placed(&cands), "d");
        let none = place(&cands[..2]).unwrap_err();
        assert_eq!(
            none.to_string(),
            "b is unreachable (connection refused); the credentials of c lack create \
             networkpolicies.networking.k8s.io, delete networkpolicies.networking.k8s.io, \
             create namespaces and 1 more"
        );
        assert!(none.may_clear(), "b may come back");
        let misconfigured = place(&[
            c("c", lacks, None, 0),
            c("e", Standing::Unregistered, None, 0),
            c("f", Standing::Invalid("no server".into()), None, 0),
        ])
        .unwrap_err();
        assert!(!misconfigured.may_clear(), "an admin must fix one");
        assert!(misconfigured.lacks_access());
        assert!(
            misconfigured
                .to_string()
                .contains("e is not registered (no Secret labelled sandcastle.dev/cluster=e)"),
            "{misconfigured}"
        );
        let full = place(&[c("b", Standing::Ready, Some(1), 1)]).unwrap_err();
        assert!(full.may_clear(), "a preview may close");
    }

    #[test]
    fn cluster_names_are_dns_labels() {
        assert!(ClusterName::new("eu-west-1").is_ok());
        assert!(ClusterName::in_cluster().is_local());
        for bad in ["", "B", "a_b", "-a", &"x".repeat(64)] {
            assert!(ClusterName::new(bad).is_err(), "{bad:?}");
        }
    }
}
