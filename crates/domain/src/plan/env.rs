//! The `sandcastle-env` ConfigMap: the built-in variables every container of a preview gets
//! through `envFrom`.

use serde_json::{Map, Value, json};

use super::{ENV_CONFIG_MAP, Obj, PreviewContext};

/// The built-in variables, in the order people read them. Values are always strings (empty
/// when there is no value, so that a program can rely on the variable being set).
pub(crate) fn variables(ctx: &PreviewContext, url: Option<&str>) -> Vec<(&'static str, String)> {
    vec![
        ("SANDCASTLE_PREVIEW", ctx.preview.to_string()),
        ("SANDCASTLE_URL", url.unwrap_or_default().to_owned()),
        (
            "SANDCASTLE_PR",
            ctx.pr.map(|p| p.to_string()).unwrap_or_default(),
        ),
        ("SANDCASTLE_SHA", ctx.sha.to_string()),
        ("SANDCASTLE_REPOSITORY", ctx.repo.to_string()),
        ("SANDCASTLE_BRANCH", ctx.branch.clone()),
        ("SANDCASTLE_NAMESPACE", ctx.namespace.to_string()),
    ]
}

pub(crate) fn config_map(ctx: &PreviewContext, url: Option<&str>) -> Obj {
    let data: Map<String, Value> = variables(ctx, url)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v)))
        .collect();
    Obj {
        group: String::new(),
        kind: "ConfigMap".to_owned(),
        name: ENV_CONFIG_MAP.to_owned(),
        value: json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ENV_CONFIG_MAP},
            "data": data,
        }),
    }
}

/// Append `envFrom: [{configMapRef: {name: sandcastle-env}}]` to a container, once.
pub(crate) fn add_env_from(container: &mut Value) {
    let Some(container) = container.as_object_mut() else {
        return;
    };
    let entry = container
        .entry("envFrom")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(list) = entry.as_array_mut() else {
        return;
    };
    let present = list
        .iter()
        .any(|e| e["configMapRef"]["name"].as_str() == Some(ENV_CONFIG_MAP));
    if !present {
        list.push(json!({"configMapRef": {"name": ENV_CONFIG_MAP}}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_from_is_appended_once() {
        let mut c = json!({"name": "api", "envFrom": [{"secretRef": {"name": "db"}}]});
        add_env_from(&mut c);
        add_env_from(&mut c);
        assert_eq!(
            c["envFrom"],
            json!([{"secretRef": {"name": "db"}}, {"configMapRef": {"name": "sandcastle-env"}}])
        );
        let mut bare = json!({"name": "api"});
        add_env_from(&mut bare);
        assert_eq!(
            bare["envFrom"],
            json!([{"configMapRef": {"name": "sandcastle-env"}}])
        );
    }
}
