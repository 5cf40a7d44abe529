//! Pod Security refusals: every control of `baseline` and `restricted`, with exact field paths.

use super::*;

const RESTRICTED: &str = "isolation: {podSecurity: restricted}";

/// A restricted-compliant container and pod security context.
const GOOD_CONTAINER: &str = "      - name: app\n        image: app\n        securityContext:\n          allowPrivilegeEscalation: false\n          capabilities: {drop: [ALL]}\n";
const GOOD_POD: &str =
    "      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}\n";

fn problems(pod: &str, extra: &str) -> Vec<String> {
    match run(&deployment("api", pod), extra) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn baseline_forbids_each_control_naming_the_field() {
    let p = "Deployment api: spec.template.spec";
    let lvl = "by Pod Security level baseline";
    let table = [
        (
            "      containers: [{name: c, image: x, securityContext: {privileged: true}}]\n",
            format!(
                "{p}.containers[0].securityContext.privileged: privileged containers are forbidden {lvl}"
            ),
        ),
        (
            "      hostNetwork: true\n      containers: [{name: c, image: x}]\n",
            format!("{p}.hostNetwork: sharing host namespaces is forbidden {lvl}"),
        ),
        (
            "      hostPID: true\n      containers: [{name: c, image: x}]\n",
            format!("{p}.hostPID: sharing host namespaces is forbidden {lvl}"),
        ),
        (
            "      hostIPC: true\n      containers: [{name: c, image: x}]\n",
            format!("{p}.hostIPC: sharing host namespaces is forbidden {lvl}"),
        ),
        (
            "      volumes: [{name: v, emptyDir: {}}, {name: h, hostPath: {path: /var/run}}]\n      containers: [{name: c, image: x}]\n",
            format!("{p}.volumes[1].hostPath: hostPath volumes are forbidden {lvl}"),
        ),
        (
            "      containers: [{name: c, image: x, ports: [{containerPort: 80}, {containerPort: 81, hostPort: 8081}]}]\n",
            format!("{p}.containers[0].ports[1].hostPort: host ports are forbidden {lvl}"),
        ),
        (
            "      initContainers: [{name: i, image: x, securityContext: {capabilities: {add: [CHOWN, SYS_ADMIN]}}}]\n      containers: [{name: c, image: x}]\n",
            format!(
                "{p}.initContainers[0].securityContext.capabilities.add[1]: adding capability SYS_ADMIN is forbidden {lvl}"
            ),
        ),
        (
            "      containers: [{name: c, image: x, securityContext: {procMount: Unmasked}}]\n",
            format!(
                "{p}.containers[0].securityContext.procMount: procMount Unmasked is forbidden {lvl}"
            ),
        ),
        (
            "      securityContext: {seccompProfile: {type: Unconfined}}\n      containers: [{name: c, image: x}]\n",
            format!(
                "{p}.securityContext.seccompProfile.type: the Unconfined seccomp profile is forbidden {lvl}"
            ),
        ),
        (
            "      containers: [{name: c, image: x, securityContext: {appArmorProfile: {type: Unconfined}}}]\n",
            format!(
                "{p}.containers[0].securityContext.appArmorProfile.type: AppArmor profile Unconfined is forbidden {lvl}"
            ),
        ),
        (
            "      securityContext: {seLinuxOptions: {type: spc_t}}\n      containers: [{name: c, image: x}]\n",
            format!(
                "{p}.securityContext.seLinuxOptions.type: SELinux type spc_t is forbidden {lvl}"
            ),
        ),
        (
            "      containers: [{name: c, image: x, securityContext: {seLinuxOptions: {user: system_u}}}]\n",
            format!(
                "{p}.containers[0].securityContext.seLinuxOptions.user: setting the SELinux user is forbidden {lvl}"
            ),
        ),
        (
            "      securityContext: {sysctls: [{name: net.ipv4.tcp_syncookies, value: '1'}, {name: kernel.msgmax, value: '1'}]}\n      containers: [{name: c, image: x}]\n",
            format!(
                "{p}.securityContext.sysctls[1].name: sysctl kernel.msgmax is outside the safe set and forbidden {lvl}"
            ),
        ),
        (
            "      containers: [{name: c, image: x, livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}}]\n",
            format!(
                "{p}.containers[0].livenessProbe.httpGet.host: probes and lifecycle handlers aimed at another host are forbidden {lvl}"
            ),
        ),
        (
            "      containers: [{name: c, image: x, lifecycle: {preStop: {tcpSocket: {host: db, port: 5432}}}}]\n",
            format!(
                "{p}.containers[0].lifecycle.preStop.tcpSocket.host: probes and lifecycle handlers aimed at another host are forbidden {lvl}"
            ),
        ),
        (
            "      securityContext: {windowsOptions: {hostProcess: true}}\n      containers: [{name: c, image: x}]\n",
            format!(
                "{p}.securityContext.windowsOptions.hostProcess: Windows HostProcess containers are forbidden {lvl}"
            ),
        ),
    ];
    for (pod, want) in table {
        assert_eq!(problems(pod, ""), [want], "{pod}");
    }
}

#[test]
fn legacy_apparmor_annotations_are_checked() {
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  template:\n    metadata:\n      annotations:\n        container.apparmor.security.beta.kubernetes.io/c: unconfined\n        container.apparmor.security.beta.kubernetes.io/d: localhost/mine\n    spec: {containers: [{name: c, image: x}, {name: d, image: x}]}\n";
    assert_eq!(
        refusal(yaml, ""),
        "Deployment api: spec.template.metadata.annotations[\"container.apparmor.security.beta.kubernetes.io/c\"]: AppArmor profile unconfined is forbidden by Pod Security level baseline"
    );
}

#[test]
fn baseline_allows_the_default_pod_and_its_allowed_values() {
    let pod = "      securityContext: {seccompProfile: {type: RuntimeDefault}, sysctls: [{name: net.ipv4.tcp_keepalive_time, value: '60'}], seLinuxOptions: {type: container_t}}\n      volumes: [{name: n, nfs: {server: x, path: /}}]\n      containers: [{name: c, image: x, securityContext: {capabilities: {add: [NET_BIND_SERVICE, CHOWN]}, privileged: false, procMount: Default}, ports: [{containerPort: 80, hostPort: 0}]}]\n";
    assert_eq!(problems(pod, ""), Vec::<String>::new());
}

#[test]
fn restricted_requires_hardened_pods() {
    let p = "Deployment api: spec.template.spec";
    let under = "under Pod Security level restricted";
    let by = "by Pod Security level restricted";
    let table: [(String, Vec<String>); 6] = [
        (format!("{GOOD_POD}      containers:\n{GOOD_CONTAINER}"), vec![]),
        (
            "      containers: [{name: c, image: x}]\n".to_owned(),
            vec![
                format!("{p}.containers[0].securityContext.capabilities.drop: must include ALL {under}"),
                format!("{p}.containers[0].securityContext.allowPrivilegeEscalation: must be false {under}"),
                format!("{p}.containers[0].securityContext.runAsNonRoot: must be true (here or in {}.securityContext) {under}", "spec.template.spec"),
                format!("{p}.containers[0].securityContext.seccompProfile.type: must be RuntimeDefault or Localhost (here or in spec.template.spec.securityContext) {under}"),
            ],
        ),
        (
            format!("{GOOD_POD}      volumes: [{{name: d, nfs: {{server: x, path: /}}}}, {{name: h, hostPath: {{path: /}}}}, {{name: c, configMap: {{name: x}}}}]\n      containers:\n{GOOD_CONTAINER}"),
            vec![
                format!("{p}.volumes[0].nfs: nfs volumes are forbidden (allowed: configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret) {by}"),
                format!("{p}.volumes[1].hostPath: hostPath volumes are forbidden {by}"),
            ],
        ),
        (
            "      securityContext: {runAsNonRoot: true, runAsUser: 0, seccompProfile: {type: Localhost, localhostProfile: x.json}}\n      containers: [{name: c, image: x, securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE, CHOWN]}}}]\n".to_owned(),
            vec![
                format!("{p}.securityContext.runAsUser: running as root (UID 0) is forbidden {by}"),
                format!("{p}.containers[0].securityContext.capabilities.add[1]: adding capability CHOWN is forbidden (only NET_BIND_SERVICE may be added) {by}"),
                format!("{p}.containers[0].securityContext.runAsNonRoot: runAsNonRoot: false is forbidden {by}"),
            ],
        ),
        (
            // A pod in a user namespace may run as root inside it.
            "      hostUsers: false\n      securityContext: {runAsUser: 0, seccompProfile: {type: RuntimeDefault}}\n      containers: [{name: c, image: x, securityContext: {allowPrivilegeEscalation: false, procMount: Unmasked, capabilities: {drop: [ALL]}}}]\n".to_owned(),
            vec![],
        ),
        (
            // Windows pods are exempt from the privilege escalation, seccomp and capability checks.
            "      os: {name: windows}\n      securityContext: {runAsNonRoot: true}\n      containers: [{name: c, image: x}]\n".to_owned(),
            vec![],
        ),
    ];
    for (pod, want) in table {
        assert_eq!(problems(&pod, RESTRICTED), want, "{pod}");
    }
}

#[test]
fn every_pod_template_is_checked() {
    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: '0 3 * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          volumes: [{name: h, hostPath: {path: /}}]\n          containers: [{name: c, image: x}]\n";
    assert_eq!(
        refusal(cron, ""),
        "CronJob nightly: spec.jobTemplate.spec.template.spec.volumes[0].hostPath: hostPath volumes are forbidden by Pod Security level baseline"
    );
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: seed}\nspec: {template: {spec: {containers: [{name: c, image: x, securityContext: {privileged: true}}]}}}\n";
    assert_eq!(
        refusal(job, ""),
        "Job seed: spec.template.spec.containers[0].securityContext.privileged: privileged containers are forbidden by Pod Security level baseline"
    );
    let rollout = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: web}\nspec: {template: {spec: {hostNetwork: true, containers: [{name: c, image: x}]}}}\n";
    assert_eq!(
        refusal(
            rollout,
            "allowKinds: [{apiVersion: argoproj.io/v1alpha1, kind: Rollout}]"
        ),
        "Rollout web: spec.template.spec.hostNetwork: sharing host namespaces is forbidden by Pod Security level baseline"
    );
}
