//! Pod Security: refuse pod templates the preview namespace's Pod Security level (`baseline` or
//! `restricted`, enforced at version `latest`) would reject, naming the exact field, before
//! anything is applied. Mirrors the checks of `k8s.io/pod-security-admission`, including its
//! exemptions: Windows pods (`spec.os.name: windows`) are exempt from the restricted
//! privilege-escalation, seccomp and capability checks, and pods in a user namespace
//! (`hostUsers: false`) from the procMount, runAsNonRoot and runAsUser checks.

use serde_json::Value;

use super::kinds::Class;
use super::pods::{CONTAINER_LISTS, dotted, get, template_paths};
use super::{Obj, Problem};
use sandcastle_crd::PodSecurityLevel;
use sandcastle_crd::labels;

/// Capabilities `baseline` lets a container add (Docker's default set).
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Sysctls `baseline` allows: namespaced and isolated from other pods.
const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// SELinux types `baseline` allows (besides none).
const SELINUX_TYPES: [&str; 4] = [
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// Volume types `restricted` allows.
const RESTRICTED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

const PROBES: [&str; 3] = ["livenessProbe", "readinessProbe", "startupProbe"];
const LIFECYCLE: [&str; 2] = ["postStart", "preStop"];

/// Every Pod Security problem of the object's pod templates.
pub(crate) fn check(obj: &Obj, class: Class, level: PodSecurityLevel) -> Vec<Problem> {
    let mut checker = Checker {
        obj,
        restricted: level == PodSecurityLevel::Restricted,
        level: match level {
            PodSecurityLevel::Baseline => "baseline",
            PodSecurityLevel::Restricted => "restricted",
        },
        problems: Vec::new(),
    };
    for path in template_paths(obj, class) {
        if let Some(template) = get(&obj.value, path) {
            checker.pod(template, &dotted(path));
        }
    }
    checker.problems
}

struct Checker<'a> {
    obj: &'a Obj,
    restricted: bool,
    level: &'static str,
    problems: Vec<Problem>,
}

fn is_true(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

fn text(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

fn items(v: &Value) -> impl Iterator<Item = (usize, &Value)> {
    v.as_array().into_iter().flatten().enumerate()
}

/// Seccomp and AppArmor profile types that confine: the runtime's default or a local profile.
fn confining(profile_type: &str) -> bool {
    matches!(profile_type, "RuntimeDefault" | "Localhost")
}

impl Checker<'_> {
    /// `<what> by Pod Security level <level>`, e.g. "privileged containers are forbidden by…".
    fn forbid(&mut self, field: String, what: impl AsRef<str>) {
        let reason = format!("{} by Pod Security level {}", what.as_ref(), self.level);
        self.problems.push(self.obj.problem(field, reason));
    }

    /// `<requirement> under Pod Security level <level>`, e.g. "must be false under…".
    fn require(&mut self, field: String, requirement: impl AsRef<str>) {
        let reason = format!(
            "{} under Pod Security level {}",
            requirement.as_ref(),
            self.level
        );
        self.problems.push(self.obj.problem(field, reason));
    }

    fn pod(&mut self, template: &Value, base: &str) {
        let spec = &template["spec"];
        let sp = format!("{base}.spec");
        let psc = &spec["securityContext"];
        let windows = spec["os"]["name"].as_str() == Some("windows");
        let user_namespace = spec["hostUsers"].as_bool() == Some(false);

        for field in ["hostNetwork", "hostPID", "hostIPC"] {
            if is_true(&spec[field]) {
                self.forbid(
                    format!("{sp}.{field}"),
                    "sharing host namespaces is forbidden",
                );
            }
        }
        self.security_context(psc, &format!("{sp}.securityContext"));
        for (i, sysctl) in items(&psc["sysctls"]) {
            let name = sysctl["name"].as_str().unwrap_or_default();
            if !SAFE_SYSCTLS.contains(&name) {
                self.forbid(
                    format!("{sp}.securityContext.sysctls[{i}].name"),
                    format!("sysctl {name} is outside the safe set and forbidden"),
                );
            }
        }
        if let Some(annotations) = template["metadata"]["annotations"].as_object() {
            for (key, value) in annotations {
                let value = value.as_str().unwrap_or_default();
                if key.starts_with(labels::APPARMOR_CONTAINER_PREFIX)
                    && !(value.is_empty()
                        || value == "runtime/default"
                        || value.starts_with("localhost/"))
                {
                    self.forbid(
                        format!("{base}.metadata.annotations[\"{key}\"]"),
                        format!("AppArmor profile {value} is forbidden"),
                    );
                }
            }
        }
        for (i, volume) in items(&spec["volumes"]) {
            self.volume(volume, &format!("{sp}.volumes[{i}]"));
        }
        if self.restricted && !user_namespace {
            if psc["runAsNonRoot"].as_bool() == Some(false) {
                self.forbid(
                    format!("{sp}.securityContext.runAsNonRoot"),
                    "runAsNonRoot: false is forbidden",
                );
            }
            if psc["runAsUser"].as_i64() == Some(0) {
                self.forbid(
                    format!("{sp}.securityContext.runAsUser"),
                    "running as root (UID 0) is forbidden",
                );
            }
        }
        let pod = PodDefaults {
            sp: &sp,
            windows,
            user_namespace,
            run_as_non_root: is_true(&psc["runAsNonRoot"]),
            seccomp_confined: psc["seccompProfile"]["type"]
                .as_str()
                .is_some_and(confining),
        };
        for list in CONTAINER_LISTS {
            for (i, container) in items(&spec[list]) {
                self.container(container, &format!("{sp}.{list}[{i}]"), &pod);
            }
        }
    }

    /// Checks shared by pod and container security contexts.
    fn security_context(&mut self, sc: &Value, at: &str) {
        if is_true(&sc["windowsOptions"]["hostProcess"]) {
            self.forbid(
                format!("{at}.windowsOptions.hostProcess"),
                "Windows HostProcess containers are forbidden",
            );
        }
        let selinux = &sc["seLinuxOptions"];
        if let Some(t) = text(&selinux["type"])
            && !SELINUX_TYPES.contains(&t)
        {
            self.forbid(
                format!("{at}.seLinuxOptions.type"),
                format!("SELinux type {t} is forbidden"),
            );
        }
        for field in ["user", "role"] {
            if text(&selinux[field]).is_some() {
                self.forbid(
                    format!("{at}.seLinuxOptions.{field}"),
                    format!("setting the SELinux {field} is forbidden"),
                );
            }
        }
        if sc["seccompProfile"]["type"].as_str() == Some("Unconfined") {
            self.forbid(
                format!("{at}.seccompProfile.type"),
                "the Unconfined seccomp profile is forbidden",
            );
        }
        if let Some(t) = text(&sc["appArmorProfile"]["type"])
            && !confining(t)
        {
            self.forbid(
                format!("{at}.appArmorProfile.type"),
                format!("AppArmor profile {t} is forbidden"),
            );
        }
    }

    fn volume(&mut self, volume: &Value, at: &str) {
        let Some(fields) = volume.as_object() else {
            return;
        };
        for kind in fields.keys().filter(|k| *k != "name") {
            if kind == "hostPath" {
                self.forbid(format!("{at}.hostPath"), "hostPath volumes are forbidden");
            } else if self.restricted && !RESTRICTED_VOLUMES.contains(&kind.as_str()) {
                self.forbid(
                    format!("{at}.{kind}"),
                    format!(
                        "{kind} volumes are forbidden (allowed: {})",
                        RESTRICTED_VOLUMES.join(", ")
                    ),
                );
            }
        }
    }

    fn container(&mut self, c: &Value, at: &str, pod: &PodDefaults<'_>) {
        let sc = &c["securityContext"];
        let cp = format!("{at}.securityContext");
        if is_true(&sc["privileged"]) {
            self.forbid(
                format!("{cp}.privileged"),
                "privileged containers are forbidden",
            );
        }
        for (j, port) in items(&c["ports"]) {
            if port["hostPort"].as_i64().is_some_and(|p| p != 0) {
                self.forbid(
                    format!("{at}.ports[{j}].hostPort"),
                    "host ports are forbidden",
                );
            }
        }
        self.security_context(sc, &cp);
        if let Some(mount) = text(&sc["procMount"])
            && mount != "Default"
            && !pod.user_namespace
        {
            self.forbid(
                format!("{cp}.procMount"),
                format!("procMount {mount} is forbidden"),
            );
        }
        self.remote_hosts(c, at);
        self.capabilities(&sc["capabilities"], &format!("{cp}.capabilities"), pod);
        if !self.restricted {
            return;
        }
        if !pod.windows && sc["allowPrivilegeEscalation"].as_bool() != Some(false) {
            self.require(format!("{cp}.allowPrivilegeEscalation"), "must be false");
        }
        if !pod.user_namespace {
            match sc["runAsNonRoot"].as_bool() {
                Some(false) => self.forbid(
                    format!("{cp}.runAsNonRoot"),
                    "runAsNonRoot: false is forbidden",
                ),
                None if !pod.run_as_non_root => self.require(
                    format!("{cp}.runAsNonRoot"),
                    format!("must be true (here or in {}.securityContext)", pod.sp),
                ),
                _ => {}
            }
            if sc["runAsUser"].as_i64() == Some(0) {
                self.forbid(
                    format!("{cp}.runAsUser"),
                    "running as root (UID 0) is forbidden",
                );
            }
        }
        if !pod.windows {
            match sc["seccompProfile"]["type"].as_str() {
                Some(t) if confining(t) || t == "Unconfined" => {}
                None if pod.seccomp_confined => {}
                _ => self.require(
                    format!("{cp}.seccompProfile.type"),
                    format!(
                        "must be RuntimeDefault or Localhost (here or in {}.securityContext)",
                        pod.sp
                    ),
                ),
            }
        }
    }

    /// Probes and lifecycle handlers must not reach another host (baseline, Kubernetes 1.34+).
    fn remote_hosts(&mut self, c: &Value, at: &str) {
        let probes = PROBES.map(|p| (p.to_owned(), &c[p]));
        let hooks = LIFECYCLE.map(|h| (format!("lifecycle.{h}"), &c["lifecycle"][h]));
        for (name, handler) in probes.into_iter().chain(hooks) {
            for action in ["httpGet", "tcpSocket"] {
                if text(&handler[action]["host"]).is_some() {
                    self.forbid(
                        format!("{at}.{name}.{action}.host"),
                        "probes and lifecycle handlers aimed at another host are forbidden",
                    );
                }
            }
        }
    }

    fn capabilities(&mut self, caps: &Value, at: &str, pod: &PodDefaults<'_>) {
        let restricted = self.restricted && !pod.windows;
        for (j, cap) in items(&caps["add"]) {
            let cap = cap.as_str().unwrap_or_default();
            if restricted && cap != "NET_BIND_SERVICE" {
                self.forbid(
                    format!("{at}.add[{j}]"),
                    format!(
                        "adding capability {cap} is forbidden (only NET_BIND_SERVICE may be added)"
                    ),
                );
            } else if !restricted && !BASELINE_CAPABILITIES.contains(&cap) {
                self.forbid(
                    format!("{at}.add[{j}]"),
                    format!("adding capability {cap} is forbidden"),
                );
            }
        }
        let drops_all = items(&caps["drop"]).any(|(_, c)| c.as_str() == Some("ALL"));
        if restricted && !drops_all {
            self.require(format!("{at}.drop"), "must include ALL");
        }
    }
}

/// What the pod decides for all its containers.
struct PodDefaults<'a> {
    sp: &'a str,
    windows: bool,
    user_namespace: bool,
    run_as_non_root: bool,
    seccomp_confined: bool,
}
