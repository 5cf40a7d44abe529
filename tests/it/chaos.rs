//! The chaos run (`scripts/chaos`, which gives it a control plane of its own): pull requests
//! driven through a random but seeded sequence of opened, synchronize, closed, reopened, labels
//! and `/preview` commands — some deliveries duplicated, some held back and delivered late —
//! against two `sandcastle serve` processes electing a leader, while the leader is killed at
//! random points, kube-apiserver is restarted, and the GitHub stand-in answers 500s, secondary
//! rate limits and slow responses — and, for stretches, is slow on every call (past what the
//! webhook used to wait for) or down. Then, once everything has settled: every open pull request
//! has exactly one preview at its head commit and Ready, every closed one's namespace is gone,
//! one GitHub deployment per (preview, commit) life, statuses in a valid order, one sticky
//! comment per preview and no orphan namespace. It prints the run as a table.
//!
//! Knobs (environment): `SANDCASTLE_CHAOS_SEED`, `_PRS`, `_STEPS`, `_RESTARTS` (of
//! kube-apiserver), `_KILLS` (of the leader), `_SLOW` (stretches of a slow or absent GitHub),
//! `_SETTLE` (seconds to converge).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sandcastle::crd::Phase;
use sandcastle::domain::Sha;
use sandcastle::domain::naming::github_environment;
use sandcastle::github::text::parse_marker;
use sandcastle_fake_github::{Delivery, Fault, PrSpec};
use serde_json::json;

use crate::support::api::client;
use crate::support::process::ServeProcess;
use crate::support::world::{World, pr, sha};

const SECRET: &str = "chaos-run-webhook-secret";
const NO_PREVIEW: &str = "no-preview";
/// A pod ready a second after it starts, behind a Service.
fn stack() -> String {
    let service = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n";
    format!("{}---\n{service}", crate::support::fixtures::slow_app("1s"))
}

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(format!("SANDCASTLE_CHAOS_{name}"))
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("SANDCASTLE_CHAOS_{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

/// What the run did, for the table.
#[derive(Default)]
struct Tally {
    sent: u32,
    duplicates: u32,
    held: u32,
    answered: BTreeMap<u16, u32>,
    undelivered: u32,
    kinds: BTreeMap<&'static str, u32>,
    leader_kills: u32,
    restarts: u32,
    faults: BTreeMap<&'static str, u32>,
}

/// One pull request as GitHub sees it.
struct Pull {
    number: u64,
    head: Sha,
    open: bool,
    merged: bool,
    no_preview: bool,
}

impl Pull {
    fn wants_preview(&self) -> bool {
        self.open && !self.no_preview
    }
}

/// The `sandcastle serve` processes, by Lease identity.
struct Replicas {
    live: Vec<(String, ServeProcess)>,
    started: u32,
}

impl Replicas {
    async fn start(&mut self, world: &World) {
        self.started += 1;
        let identity = format!("replica-{}", self.started);
        let process = ServeProcess::start(
            world,
            SECRET,
            &[
                ("SANDCASTLE_LEADER_ELECTION", "true".to_owned()),
                ("SANDCASTLE_IDENTITY", identity.clone()),
                ("SANDCASTLE_LEASE_DURATION", "3s".to_owned()),
                ("SANDCASTLE_RESYNC_INTERVAL", "15s".to_owned()),
                ("SANDCASTLE_ORPHAN_GRACE", "30s".to_owned()),
            ],
        )
        .await;
        self.live.push((identity, process));
    }

    /// Kills (SIGKILL) the replica holding the Lease, or any when none holds it now.
    async fn kill_leader(&mut self, world: &World, rng: &mut StdRng) -> String {
        let leases: Api<Lease> = Api::namespaced(world.client.clone(), &world.home.name);
        let holder = leases
            .get_opt("sandcastle-leader")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        let i = holder
            .and_then(|h| self.live.iter().position(|(id, _)| *id == h))
            .unwrap_or_else(|| rng.random_range(0..self.live.len()));
        let (identity, process) = self.live.remove(i);
        process.kill().await;
        identity
    }

    fn addr(&self, rng: &mut StdRng) -> SocketAddr {
        self.live[rng.random_range(0..self.live.len())].1.addr
    }
}

/// kube-apiserver restarts through the control plane's supervisor (`kube-harness up`): SIGUSR1,
/// then its count of restarts goes up once the API is ready again.
struct Harness {
    dir: std::path::PathBuf,
}

impl Harness {
    fn from_env() -> Self {
        let dir = std::env::var("SANDCASTLE_HARNESS_DIR").expect(
            "the chaos run restarts kube-apiserver, so it needs a control plane of its own: run it \
             with scripts/chaos (SANDCASTLE_HARNESS_DIR is not set)",
        );
        Self { dir: dir.into() }
    }

    fn restarts(&self) -> u32 {
        std::fs::read_to_string(self.dir.join("apiserver-restarts"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Starts a restart; the returned task ends when the API is back.
    fn restart_apiserver(&self) -> tokio::task::JoinHandle<()> {
        let before = self.restarts();
        let pid = std::fs::read_to_string(self.dir.join("pid")).expect("the harness pid file");
        let ok = std::process::Command::new("kill")
            .args(["-USR1", pid.trim()])
            .status()
            .expect("kill runs");
        assert!(ok.success(), "signalling the control plane failed");
        let dir = self.dir.clone();
        tokio::spawn(async move {
            let this = Harness { dir };
            crate::support::eventually(
                "kube-apiserver is back",
                Duration::from_secs(90),
                || async {
                    if this.restarts() > before {
                        Ok(())
                    } else {
                        Err("restarting".to_owned())
                    }
                },
            )
            .await;
        })
    }
}

/// A delivery held back until step `at`.
struct Held {
    at: u64,
    delivery: Delivery,
    pr: u64,
    kind: String,
}

/// Sends `d`; returns its answer's status (`0`: not delivered).
async fn send(addr: SocketAddr, d: &Delivery, tally: &mut Tally) -> u16 {
    let mut req = client()
        .post(format!("http://{addr}/github/webhook"))
        .timeout(Duration::from_secs(30))
        .body(d.body.clone());
    for (k, v) in d.signed_headers(SECRET) {
        req = req.header(k, v);
    }
    tally.sent += 1;
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            *tally.answered.entry(status).or_default() += 1;
            status
        }
        Err(_) => {
            tally.undelivered += 1;
            0
        }
    }
}

/// The next thing a person does on GitHub, applied to the stand-in; returns its delivery, what
/// it was and the pull request's number.
fn act(
    world: &World,
    pulls: &mut Vec<Pull>,
    wanted: u64,
    rng: &mut StdRng,
) -> (Delivery, &'static str, u64) {
    let repo = &world.repo;
    let opened = pulls.len() as u64;
    if opened < wanted && (rng.random_bool(0.25) || !pulls.iter().any(|p| p.open)) {
        let number = opened + 1;
        let head = sha();
        let d = world.gh.open_pull_request(
            repo,
            PrSpec::new(pr(number), head.clone(), &format!("feature-{number}")),
        );
        pulls.push(Pull {
            number,
            head,
            open: true,
            merged: false,
            no_preview: false,
        });
        return (d, "opened", number);
    }
    loop {
        let p = rng.random_range(0..pulls.len());
        let pull = &mut pulls[p];
        let n = pr(pull.number);
        let number = pull.number;
        if pull.open {
            let roll = rng.random_range(0..100);
            let (d, kind) = match roll {
                0..44 => {
                    pull.head = sha();
                    (world.gh.push(repo, n, &pull.head), "synchronize")
                }
                44..52 => {
                    pull.open = false;
                    pull.merged = rng.random_bool(0.5);
                    (world.gh.close(repo, n, pull.merged), "closed")
                }
                52..62 => {
                    pull.no_preview = !pull.no_preview;
                    if pull.no_preview {
                        (world.gh.label(repo, n, NO_PREVIEW), "labeled no-preview")
                    } else {
                        (
                            world.gh.unlabel(repo, n, NO_PREVIEW),
                            "unlabeled no-preview",
                        )
                    }
                }
                62..72 => (world.gh.label(repo, n, "bug"), "labeled bug"),
                // Refused while the pull request is labelled no-preview.
                _ => (world.gh.comment(repo, n, "maria", "/preview"), "/preview"),
            };
            return (d, kind, number);
        }
        if !pull.merged && rng.random_bool(0.6) {
            pull.open = true;
            return (world.gh.reopen(repo, n), "reopened", number);
        }
    }
}

/// One GitHub fault for the next few calls to the repository's endpoints.
fn inject_fault(world: &World, rng: &mut StdRng, tally: &mut Tally) {
    let times = rng.random_range(1..=3);
    let (fault, name) = match rng.random_range(0..3) {
        0 => (
            Fault::ServerError(*[500, 502].get(rng.random_range(0..2)).unwrap()),
            "5xx",
        ),
        1 => (
            Fault::SecondaryRateLimit {
                retry_after_secs: 1,
            },
            "secondary rate limit",
        ),
        _ => (Fault::Slow(Duration::from_millis(1500)), "slow (1.5 s)"),
    };
    world.gh.fail_next("/repos/**", times, fault);
    *tally.faults.entry(name).or_default() += times;
}

/// A stretch of a GitHub that answers every call after 5 s, or not at all, for the next calls.
fn slow_github(world: &World, rng: &mut StdRng, tally: &mut Tally) -> &'static str {
    let (fault, name) = if rng.random_bool(0.5) {
        (
            Fault::Slow(Duration::from_secs(5)),
            "slow GitHub (5 s a call)",
        )
    } else {
        (Fault::Down, "GitHub down")
    };
    let calls = rng.random_range(20..=40);
    world.gh.fail_next("/**", calls, fault);
    *tally.faults.entry(name).or_default() += calls;
    name
}

/// Steps (distinct, away from the ends) at which something happens `count` times.
fn schedule(rng: &mut StdRng, steps: u64, count: u64) -> BTreeSet<u64> {
    let mut at = BTreeSet::new();
    while (at.len() as u64) < count.min(steps / 2) {
        at.insert(rng.random_range(steps / 10..steps * 9 / 10));
    }
    at
}

/// What is wrong now; empty once the run has converged. `counts` gets the table's figures.
async fn problems(
    world: &World,
    pulls: &[Pull],
    counts: &mut BTreeMap<&'static str, u32>,
) -> Vec<String> {
    let mut out = Vec::new();
    counts.clear();
    let previews = world.previews().list(&ListParams::default()).await;
    let Ok(previews) = previews else {
        return vec!["the API server does not answer".to_owned()];
    };
    let namespaces: Api<Namespace> = Api::all(world.client.clone());
    let Ok(namespaces) = namespaces.list(&ListParams::default()).await else {
        return vec!["the API server does not answer".to_owned()];
    };
    let live_ns: BTreeSet<String> = namespaces
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with(&format!("{}-", world.prefix)))
        .collect();
    let deployments = world.gh.deployments(&world.repo);
    let mut expected_ns = BTreeSet::new();
    for pull in pulls {
        let name = format!("chaos-pr-{}", pull.number);
        let ns = world.namespace_of(&name);
        let pe = previews
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&name));
        let stickies = world
            .gh
            .comments(&world.repo, pr(pull.number))
            .iter()
            .filter(|c| c.by_app && parse_marker(&c.body).is_some_and(|m| m.preview == name))
            .count();
        if stickies > 1 {
            out.push(format!("#{}: {stickies} sticky comments", pull.number));
            *counts.entry("duplicated").or_default() += stickies as u32 - 1;
        }
        if !pull.wants_preview() {
            *counts.entry("closed or labelled").or_default() += 1;
            let removed =
                pe.is_none_or(|p| p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Removed));
            if !removed || live_ns.contains(&ns) {
                out.push(format!(
                    "#{}: wants no preview (open {}, labelled no-preview {}), but it is still there (phase {:?}, namespace {})",
                    pull.number,
                    pull.open,
                    pull.no_preview,
                    pe.and_then(|p| p.status.as_ref()?.phase),
                    live_ns.contains(&ns),
                ));
                *counts.entry("lost").or_default() += 1;
            } else {
                *counts.entry("closed or labelled: gone").or_default() += 1;
            }
            continue;
        }
        *counts.entry("open").or_default() += 1;
        expected_ns.insert(ns.clone());
        let st = pe.and_then(|p| p.status.clone()).unwrap_or_default();
        let at_head = pe.is_some_and(|p| p.spec.sha == pull.head.as_str());
        let ready = st.phase == Some(Phase::Ready)
            && st.deployed_sha.as_deref() == Some(pull.head.as_str());
        let env = github_environment(&name);
        let reported = deployments
            .iter()
            .filter(|d| d.environment == env && d.sha == pull.head)
            .any(|d| d.statuses.last().is_some_and(|s| s.state == "success"));
        if at_head && ready && reported && live_ns.contains(&ns) && stickies == 1 {
            *counts.entry("open: Ready at head").or_default() += 1;
        } else {
            out.push(format!(
                "#{} at {}: preview at head {at_head}, Ready there {ready}, GitHub success {reported}, namespace {}, sticky comments {stickies} (phase {:?}, deployed {:?})",
                pull.number,
                &pull.head.as_str()[..7],
                live_ns.contains(&ns),
                st.phase,
                st.deployed_sha.as_deref().map(|s| &s[..7]),
            ));
            *counts.entry("lost").or_default() += 1;
        }
    }
    for ns in live_ns.difference(&expected_ns) {
        if !pulls
            .iter()
            .any(|p| *ns == world.namespace_of(&format!("chaos-pr-{}", p.number)))
        {
            out.push(format!("orphan namespace {ns}"));
            *counts.entry("orphan namespaces").or_default() += 1;
        }
    }
    let mut lives: BTreeMap<(String, String), u32> = BTreeMap::new();
    for d in &deployments {
        let states: Vec<&str> = d.statuses.iter().map(|s| s.state.as_str()).collect();
        *counts.entry("deployments").or_default() += 1;
        *counts.entry("statuses").or_default() += states.len() as u32;
        if let Some(i) = states.iter().position(|s| *s == "inactive")
            && i + 1 < states.len()
        {
            out.push(format!(
                "deployment {} ({}): {states:?} goes on after inactive",
                d.id, d.environment
            ));
            *counts.entry("out of order").or_default() += 1;
        }
        if states.windows(2).any(|w| w[0] == w[1]) {
            out.push(format!(
                "deployment {} ({}): {states:?} repeats a status",
                d.id, d.environment
            ));
            *counts.entry("duplicated").or_default() += 1;
        }
        if states.last() != Some(&"inactive") {
            *lives
                .entry((d.environment.clone(), d.sha.as_str().to_owned()))
                .or_default() += 1;
        }
    }
    for ((env, sha), n) in lives {
        if n > 1 {
            out.push(format!("{env} at {}: {n} live deployments", &sha[..7]));
            *counts.entry("duplicated").or_default() += n - 1;
        }
    }
    out
}

#[tokio::test]
#[ignore = "a run of its own: scripts/chaos gives it a control plane it may restart"]
async fn chaos_loses_nothing_and_duplicates_nothing() {
    let harness = Harness::from_env();
    let seed = knob("SEED", 1);
    let wanted = knob("PRS", 12);
    let steps = knob("STEPS", 120);
    let settle = Duration::from_secs(knob("SETTLE", 300));
    let mut rng = StdRng::seed_from_u64(seed);
    let world = World::unstarted("chaos", &stack(), json!({"primaryService": "web"})).await;
    world
        .gh
        .set_role(&world.repo, "maria", sandcastle_fake_github::Role::Write);
    let mut replicas = Replicas {
        live: Vec::new(),
        started: 0,
    };
    replicas.start(&world).await;
    replicas.start(&world).await;

    let kills = schedule(&mut rng, steps, knob("KILLS", 2));
    let restarts = schedule(&mut rng, steps, knob("RESTARTS", 1));
    let slow = schedule(&mut rng, steps, knob("SLOW", 2));
    let mut tally = Tally::default();
    let mut pulls: Vec<Pull> = Vec::new();
    let mut held: Vec<Held> = Vec::new();
    let mut journal: Vec<(u64, String)> = Vec::new();
    let mut restarting: Option<tokio::task::JoinHandle<()>> = None;
    let started = Instant::now();
    for step in 0..steps {
        if kills.contains(&step) {
            let who = replicas.kill_leader(&world, &mut rng).await;
            tally.leader_kills += 1;
            println!("step {step}: killed {who}");
            journal.push((0, format!("step {step}: killed {who}")));
            replicas.start(&world).await;
        }
        if restarts.contains(&step) && restarting.as_ref().is_none_or(|r| r.is_finished()) {
            println!("step {step}: restarting kube-apiserver");
            restarting = Some(harness.restart_apiserver());
            tally.restarts += 1;
        }
        if slow.contains(&step) {
            let what = slow_github(&world, &mut rng, &mut tally);
            println!("step {step}: {what}");
            journal.push((0, format!("step {step}: {what}")));
        }
        if rng.random_bool(0.1) {
            inject_fault(&world, &mut rng, &mut tally);
        }
        let (delivery, kind, number) = act(&world, &mut pulls, wanted, &mut rng);
        *tally.kinds.entry(kind).or_default() += 1;
        if rng.random_bool(0.1) {
            tally.duplicates += 1;
            held.push(Held {
                at: step + rng.random_range(0..4),
                delivery: delivery.clone(),
                pr: number,
                kind: format!("{kind} (step {step}, again)"),
            });
        }
        if rng.random_bool(0.12) {
            tally.held += 1;
            held.push(Held {
                at: step + rng.random_range(1..6),
                delivery,
                pr: number,
                kind: format!("{kind} (step {step}, late)"),
            });
        } else {
            let status = send(replicas.addr(&mut rng), &delivery, &mut tally).await;
            journal.push((number, format!("step {step}: {kind} → {status}")));
        }
        let (due, later): (Vec<Held>, Vec<Held>) = held.drain(..).partition(|h| h.at <= step);
        held = later;
        for h in due {
            let status = send(replicas.addr(&mut rng), &h.delivery, &mut tally).await;
            journal.push((h.pr, format!("step {step}: {} → {status}", h.kind)));
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..120))).await;
    }
    for h in held.drain(..) {
        let status = send(replicas.addr(&mut rng), &h.delivery, &mut tally).await;
        journal.push((h.pr, format!("at the end: {} → {status}", h.kind)));
    }
    if let Some(r) = restarting {
        r.await.unwrap();
    }
    let driven = started.elapsed();

    let settled_from = Instant::now();
    let mut counts = BTreeMap::new();
    let mut last = Vec::new();
    while settled_from.elapsed() < settle {
        last = problems(&world, &pulls, &mut counts).await;
        if last.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let settled = settled_from.elapsed();
    let figure = |k: &str| counts.get(k).copied().unwrap_or(0);
    println!(
        "\nchaos run: seed {seed}, {} pull requests, {steps} steps, driven in {:.1} s",
        pulls.len(),
        driven.as_secs_f64()
    );
    println!("| | |\n|---|---|");
    println!(
        "| deliveries sent | {} (of them duplicates {}, held back and delivered late {}) |",
        tally.sent, tally.duplicates, tally.held
    );
    println!(
        "| by kind | {} |",
        tally
            .kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| answers | {}; not delivered (replica gone) {} |",
        tally
            .answered
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        tally.undelivered
    );
    println!(
        "| faults injected | leader killed {}, kube-apiserver restarted {}, GitHub: {} |",
        tally.leader_kills,
        tally.restarts,
        tally
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| open PRs with one preview, Ready at head | {} of {} |",
        figure("open: Ready at head"),
        figure("open")
    );
    println!(
        "| closed or no-preview PRs, namespace gone | {} of {} |",
        figure("closed or labelled: gone"),
        figure("closed or labelled")
    );
    println!(
        "| GitHub deployments / statuses | {} / {} |",
        figure("deployments"),
        figure("statuses")
    );
    let calls = world.gh.calls();
    let failed = calls
        .iter()
        .filter(|c| c.status >= 400 || c.status == 0)
        .count();
    println!(
        "| GitHub calls | {} ({failed} answered with an error or dropped) |",
        calls.len()
    );
    println!("| statuses out of order | {} |", figure("out of order"));
    println!("| orphan namespaces | {} |", figure("orphan namespaces"));
    println!("| lost | {} |", figure("lost"));
    println!("| duplicated | {} |", figure("duplicated"));
    println!(
        "| settled | {:.1} s after the last delivery |",
        settled.as_secs_f64()
    );
    for p in &last {
        println!("problem: {p}");
        if let Some(n) = p
            .strip_prefix('#')
            .and_then(|r| r.split([':', ' ']).next()?.parse::<u64>().ok())
        {
            for (_, line) in journal.iter().filter(|(pr, _)| *pr == n) {
                println!("    {line}");
            }
        }
    }
    let mut outputs = Vec::new();
    for (id, process) in replicas.live.drain(..) {
        outputs.push((id, process.stop().await));
    }
    if !last.is_empty() {
        for (id, (out, err)) in &outputs {
            let tail: Vec<&str> = out.lines().chain(err.lines()).rev().take(40).collect();
            println!("----- last lines of {id} -----");
            for l in tail.iter().rev() {
                println!("{l}");
            }
        }
    }
    assert!(last.is_empty(), "not settled after {settle:?}: {last:#?}");
}
