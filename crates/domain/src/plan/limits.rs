//! Containers and the preview's LimitRange. Its default limit applies to every container that
//! sets none; a container that *requests* more than that default would then have a limit below
//! its request, and the API server would refuse its pods. In the blueprint namespace (usually
//! without a LimitRange) such a container runs unbounded, so the copy gets the nearest thing that
//! is valid: a limit equal to its request.

use serde_json::Value;

use sandcastle_crd::LimitRange;

/// Give `container` a limit equal to its request for each resource (cpu, memory) where it
/// requests more than the LimitRange's default limit and sets no limit of its own.
pub(crate) fn fit(container: &mut Value, range: &LimitRange) {
    for (resource, default_limit) in [
        ("cpu", range.default_limit_cpu.as_str()),
        ("memory", range.default_limit_memory.as_str()),
    ] {
        let resources = &container["resources"];
        let Some(request) = resources["requests"][resource].as_str().map(str::to_owned) else {
            continue;
        };
        if !resources["limits"][resource].is_null() {
            continue;
        }
        let (Some(asked), Some(limit)) = (quantity(&request), quantity(default_limit)) else {
            continue;
        };
        if asked <= limit {
            continue;
        }
        // Limits that are there but not a mapping are left for the API server to refuse.
        let limits = &mut container["resources"]["limits"];
        if limits.is_null() {
            *limits = Value::Object(serde_json::Map::new());
        }
        if let Some(limits) = limits.as_object_mut() {
            limits.insert(resource.to_owned(), Value::from(request));
        }
    }
}

/// A Kubernetes quantity (`250m`, `1.5`, `512Mi`, `1G`, `1e3`) as a number, for comparison.
pub(crate) fn quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_compare_as_kubernetes_reads_them() {
        assert_eq!(quantity("250m"), Some(0.25));
        assert_eq!(quantity("2"), Some(2.0));
        assert_eq!(quantity("1.5"), Some(1.5));
        assert_eq!(quantity("1Gi"), Some(1_073_741_824.0));
        assert_eq!(quantity("1G"), Some(1e9));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert!(quantity("1Gi") > quantity("1G"));
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("1Qi"), None);
    }

    #[test]
    fn a_request_above_the_default_limit_becomes_the_limit() {
        let range = LimitRange::default(); // limits 1 cpu, 1Gi
        let mut big =
            json!({"name": "db", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}});
        fit(&mut big, &range);
        assert_eq!(big["resources"]["limits"], json!({"cpu": "2"}));

        let mut own_limit = json!({"name": "db", "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "4Gi"}}});
        let before = own_limit.clone();
        fit(&mut own_limit, &range);
        assert_eq!(own_limit, before, "a limit of its own is kept");

        let mut equal =
            json!({"name": "zk", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}});
        let before = equal.clone();
        fit(&mut equal, &range);
        assert_eq!(equal, before, "a request equal to the default limit fits");

        // Limits that are not a mapping are left as they are (the API server refuses them),
        // never written into.
        for odd in [json!("x"), json!(7), json!([]), json!(false)] {
            let mut c =
                json!({"name": "db", "resources": {"requests": {"cpu": "2"}, "limits": odd}});
            let before = c.clone();
            fit(&mut c, &range);
            assert_eq!(c, before);
        }

        let mut none = json!({"name": "web"});
        fit(&mut none, &range);
        assert_eq!(none, json!({"name": "web"}));
    }
}
