//! Sandcastle's custom resources (`sandcastle.dev/v1alpha1`) and their generated definitions.

mod access;
mod authors;
mod blueprint;
mod command;
mod data;
mod diagnosis;
pub mod duration;
mod egress;
mod event;
pub mod labels;
mod pool;
mod preview;
pub mod quote;
mod readiness;
mod schedule;
mod test_runs;

pub use access::*;
pub use authors::*;
pub use blueprint::*;
pub use command::*;
pub use data::*;
pub use diagnosis::*;
pub use duration::GoDuration;
pub use egress::*;
pub use event::*;
pub use pool::*;
pub use preview::*;
pub use readiness::*;
pub use schedule::*;
pub use test_runs::*;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The schema of a field holding any JSON object, kept as written.
fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Every custom resource definition, in a stable order.
pub fn definitions() -> Vec<CustomResourceDefinition> {
    vec![
        Blueprint::crd(),
        PreviewEnvironment::crd(),
        PreviewCommand::crd(),
        PreviewEvent::crd(),
    ]
    .into_iter()
    .map(with_known_formats)
    .map(stamped)
    .collect()
}

/// Annotation on each definition: a digest of its `spec`, so a running Sandcastle can tell
/// whether the cluster serves the schema it writes (`/readyz`). Helm installs `crds/` only on
/// the first install: after an upgrade the old schema would drop or refuse the fields a newer
/// Sandcastle writes.
pub const SCHEMA_ANNOTATION: &str = "sandcastle.dev/schema";

/// The digest of a definition's `spec` (16 hex digits of its SHA-256).
pub fn schema_digest(crd: &CustomResourceDefinition) -> String {
    use sha2::Digest as _;
    let spec = serde_json::to_vec(&crd.spec).expect("a CRD spec serializes");
    hex::encode(&sha2::Sha256::digest(&spec)[..8])
}

fn stamped(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let digest = schema_digest(&crd);
    crd.metadata
        .annotations
        .get_or_insert_default()
        .insert(SCHEMA_ANNOTATION.to_owned(), digest);
    crd
}

/// Why the installed definition `name` (its [`SCHEMA_ANNOTATION`], if any) is not the one this
/// build writes; `None` when it is.
pub fn schema_mismatch(name: &str, installed: Option<&str>) -> Option<String> {
    // Generating the definitions walks every schema: once per process, not once per probe.
    static STAMPS: std::sync::LazyLock<Vec<(String, String)>> = std::sync::LazyLock::new(|| {
        definitions()
            .into_iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    schema_digest(&c),
                )
            })
            .collect()
    });
    let wanted = &STAMPS.iter().find(|(n, _)| n == name)?.1;
    (installed != Some(wanted.as_str())).then(|| {
        format!(
            "CustomResourceDefinition {name} is not the one this Sandcastle writes (schema {}, \
             this build's {wanted}): apply the new definitions with \
             `kubectl apply --server-side -f charts/sandcastle/crds/` (or `sandcastle crds | \
             kubectl apply --server-side -f -`); Helm never upgrades them",
            installed.unwrap_or("unknown")
        )
    })
}

/// The string `format`s the API server knows for structural schemas (kube-openapi's strfmt
/// registry, as apiextensions-apiserver's `validation/formats.go` lists them); integers know
/// only `int32` and `int64`, numbers `float` and `double`. Any other format makes the API server
/// warn `unrecognized format` when the definitions are applied.
const STRING_FORMATS: [&str; 25] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
];

/// The format Kubernetes knows that stands for `format` on a schema of type `ty`, if any.
fn known_format(ty: Option<&str>, format: &str) -> Option<&'static str> {
    match ty {
        // schemars writes Rust's integer types as `uint32`, `uint64`, `int8`…; the `minimum`
        // it adds beside them keeps unsigned fields unsigned.
        Some("integer") => Some(match format {
            "int8" | "int16" | "int32" | "uint8" | "uint16" => "int32",
            _ => "int64",
        }),
        Some("number") => Some(if format == "float" { "float" } else { "double" }),
        None | Some("string") => STRING_FORMATS.iter().copied().find(|f| *f == format),
        Some(_) => None,
    }
}

/// The definitions with every schema `format` replaced by one Kubernetes knows (or dropped).
fn with_known_formats(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(format) = map.get("format").and_then(|f| f.as_str()) {
                    let ty = map.get("type").and_then(|t| t.as_str());
                    match known_format(ty, format) {
                        Some(f) => map.insert("format".into(), f.into()),
                        None => map.remove("format"),
                    };
                }
                map.values_mut().for_each(walk);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(&crd).expect("a CRD serializes");
    walk(&mut value);
    serde_json::from_value(value).expect("a CRD with known formats deserializes")
}

/// The definitions as one multi-document YAML file, the form kept in `charts/sandcastle/crds/`.
pub fn definitions_yaml() -> anyhow::Result<String> {
    let mut out = String::from("# Generated by `sandcastle crds`; do not edit.\n");
    for crd in definitions() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_definition_is_stamped_with_its_schema_and_an_old_one_is_named() {
        for crd in definitions() {
            let name = crd.metadata.name.clone().unwrap();
            let stamp = crd.metadata.annotations.as_ref().unwrap()[SCHEMA_ANNOTATION].clone();
            assert_eq!(stamp.len(), 16);
            assert_eq!(stamp, schema_digest(&crd), "the stamp is the spec's digest");
            assert_eq!(schema_mismatch(&name, Some(&stamp)), None);
            let old = schema_mismatch(&name, Some("0123456789abcdef")).unwrap();
            assert!(
                old.contains(&name) && old.contains("0123456789abcdef") && old.contains(&stamp),
                "{old}"
            );
            let unstamped = schema_mismatch(&name, None).unwrap();
            assert!(unstamped.contains("schema unknown"), "{unstamped}");
        }
        // A change to the schema changes the stamp.
        let mut crd = PreviewEnvironment::crd();
        let before = schema_digest(&crd);
        crd.spec.versions[0].served = false;
        assert_ne!(schema_digest(&crd), before);
        assert_eq!(
            schema_mismatch("widgets.example.com", None),
            None,
            "not ours: nothing to say"
        );
    }

    #[test]
    fn definitions_carry_validation_and_printer_columns() {
        let yaml = definitions_yaml().unwrap();
        for needle in [
            "duration(self.ttl) <= duration(self.maxTtl)",
            "[has(self.__namespace__), has(self.manifests), has(self.helm), has(self.kustomize)].filter(x, x).size() == 1",
            "x-kubernetes-validations",
            "jsonPath: .status.phase",
            "- previews",
            "status: {}",
        ] {
            assert!(yaml.contains(needle), "generated CRDs lack {needle:?}");
        }
    }

    #[test]
    fn every_format_is_one_kubernetes_knows() {
        let value = serde_json::to_value(definitions()).unwrap();
        let mut formats = Vec::new();
        fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(map) => {
                    if let Some(serde_json::Value::String(f)) = map.get("format") {
                        out.push(f.clone());
                        if map.get("type").and_then(|t| t.as_str()) == Some("integer") {
                            assert!(f.starts_with("int"), "integer with format {f}");
                        }
                    }
                    map.values().for_each(|v| collect(v, out));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        collect(&value, &mut formats);
        assert!(formats.iter().any(|f| f == "int64"), "{formats:?}");
        assert!(formats.iter().any(|f| f == "date-time"), "{formats:?}");
        for f in &formats {
            assert!(
                ["int32", "int64", "float", "double"].contains(&f.as_str())
                    || STRING_FORMATS.contains(&f.as_str()),
                "unknown format {f}"
            );
        }
    }
}
