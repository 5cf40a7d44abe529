//! What a render is told of the preview: Sandcastle's variables in the Helm values a Blueprint
//! writes (`image: {tag: "{{sha}}"}`) and in the release name. Pure.

use serde_json::Value;

use sandcastle_domain::plan::PreviewContext;
use sandcastle_domain::template::{self, Value as Var};

/// The preview a render is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variables {
    pub sha: String,
    pub short_sha: String,
    pub pr: Option<u64>,
    pub branch: String,
    pub preview: String,
    pub repo: String,
    pub owner: String,
    /// Where the objects go (`.Release.Namespace`).
    pub namespace: String,
}

impl Variables {
    pub fn of(ctx: &PreviewContext) -> Self {
        Self {
            sha: ctx.sha.as_str().to_owned(),
            short_sha: ctx.sha.short().to_owned(),
            pr: ctx.pr.map(|p| p.get()),
            branch: ctx.branch.clone(),
            preview: ctx.preview.to_string(),
            repo: ctx.repo.name().to_owned(),
            owner: ctx.repo.owner().to_owned(),
            namespace: ctx.namespace.to_string(),
        }
    }

    /// Render `text`: Sandcastle's `{{variables}}`, anything else between braces kept for Helm.
    pub fn render(&self, text: &str) -> Result<String, template::TemplateError> {
        let pr = self.pr.map(|p| p.to_string());
        let vars = [
            ("sha", Var::Text(&self.sha)),
            ("shortSha", Var::Text(&self.short_sha)),
            (
                "pr",
                pr.as_deref()
                    .map_or(Var::Missing("this preview has no pull request"), Var::Text),
            ),
            ("branch", Var::Text(&self.branch)),
            ("preview", Var::Text(&self.preview)),
            ("repo", Var::Text(&self.repo)),
            ("owner", Var::Text(&self.owner)),
        ];
        template::render_beside(text, &vars)
    }

    /// `values` with every string rendered; the error names the value's path.
    pub fn values(&self, values: &Value) -> Result<Value, String> {
        self.walk(values, "values")
    }

    fn walk(&self, value: &Value, at: &str) -> Result<Value, String> {
        Ok(match value {
            Value::String(s) => Value::String(self.render(s).map_err(|e| format!("{at}: {e}"))?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.walk(v, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.walk(v, &format!("{at}.{k}"))?)))
                    .collect::<Result<_, String>>()?,
            ),
            other => other.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pr: Option<u64>) -> Variables {
        Variables {
            sha: "0123456789abcdef0123456789abcdef01234567".into(),
            short_sha: "0123456".into(),
            pr,
            branch: "feature/login".into(),
            preview: "shop-pr-42".into(),
            repo: "shop".into(),
            owner: "acme".into(),
            namespace: "preview-shop-pr-42".into(),
        }
    }

    #[test]
    fn strings_anywhere_in_values_are_rendered_and_helms_templates_kept() {
        let values = json!({
            "image": {"tag": "{{shortSha}}"},
            "ingress": {"hosts": [{"host": "{{pr}}-{{repo}}.preview.example.com"}]},
            "annotations": {"x": "{{ .Release.Name }}"},
            "replicas": 1,
        });
        assert_eq!(
            vars(Some(42)).values(&values).unwrap(),
            json!({
                "image": {"tag": "0123456"},
                "ingress": {"hosts": [{"host": "42-shop.preview.example.com"}]},
                "annotations": {"x": "{{ .Release.Name }}"},
                "replicas": 1,
            })
        );
    }

    #[test]
    fn errors_name_the_value() {
        let err = vars(None)
            .values(&json!({"ingress": {"hosts": [{"host": "{{pr}}.example.com"}]}}))
            .unwrap_err();
        assert_eq!(
            err,
            "values.ingress.hosts[0].host: {{pr}} has no value here: this preview has no pull request"
        );
        let err = vars(Some(1))
            .values(&json!({"tag": "{{commit}}"}))
            .unwrap_err();
        assert!(
            err.starts_with("values.tag: unknown variable {{commit}}"),
            "{err}"
        );
    }
}
