//! A preview's front door as rules: the wildcard certificate every route serves (and which hosts
//! fit it), the gate in front of a `signedIn` preview's routes (where the ingress controller
//! asks it, the paths it answers on the preview's own host, the headers it reads and strips),
//! and the small pieces of a request the gate looks at. No I/O and no cryptography (the sealed
//! cookies and signed links are `agent::gate`'s).

use sandcastle_crd::Access;

/// The copy of the wildcard certificate's Secret in every preview namespace, named by every
/// Ingress's `tls`.
pub const TLS_SECRET: &str = "sandcastle-tls";
/// The gate's Traefik Middleware (forwardAuth) in every `signedIn` preview namespace.
pub const GATE_MIDDLEWARE: &str = "sandcastle-gate";
/// Where the ingress controller asks the gate about a request: `<gate address>` + this +
/// `<preview>` (on the edge listener, beside the waking page).
pub const GATE_CHECK_PATH: &str = "/.sandcastle/gate/";
/// Paths under this prefix on a preview's own host are the gate's (the sign-in callback, share
/// links, sign-out), never the app's.
pub const GATE_PREFIX: &str = "/.sandcastle/";
/// The cookie that lets a person or a share link's holder in, host-only on the preview's host.
pub const GATE_COOKIE: &str = "sandcastle_preview";
/// The header an agent's preview token may travel in when `Authorization` is the app's own.
pub const TOKEN_HEADER: &str = "x-sandcastle-token";
/// The header carrying a preview's header secret (tools that cannot carry tokens; probes).
pub const SECRET_HEADER: &str = "x-sandcastle-preview-secret";
/// The header the app receives naming who came in (`github:<login>`, `share:<id>`, …).
pub const USER_HEADER: &str = "x-sandcastle-user";
/// Request headers the gate decides on: the ingress controller sets each from the gate's
/// answer, so the app never sees Sandcastle's credentials (an `Authorization` or `Cookie`
/// that is the app's own is given back as it came).
pub const FORWARDED_HEADERS: [&str; 5] = [
    "X-Sandcastle-User",
    "Authorization",
    "Cookie",
    "X-Sandcastle-Token",
    "X-Sandcastle-Preview-Secret",
];

/// Which ingress controller the gate is wired into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GateProvider {
    /// Traefik: a `traefik.io` `Middleware` of type `forwardAuth`, named by each Ingress's
    /// `traefik.ingress.kubernetes.io/router.middlewares` annotation and by an `ExtensionRef`
    /// filter on each HTTPRoute and GRPCRoute rule.
    #[default]
    Traefik,
}

impl std::str::FromStr for GateProvider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "traefik" => Ok(GateProvider::Traefik),
            _ => Err("the gate supports `traefik` (forwardAuth Middleware)".to_owned()),
        }
    }
}

/// Where the gate is, as the ingress controller reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub provider: GateProvider,
    /// The edge listener's base URL (`http://sandcastle.sandcastle.svc:8081`), no trailing `/`.
    pub address: String,
}

impl Gate {
    /// The URL the ingress controller asks about a request to `preview`.
    pub fn check_url(&self, preview: &str) -> String {
        format!("{}{GATE_CHECK_PATH}{preview}", self.address)
    }
}

/// The wildcard certificate previews serve, as far as the plan needs it: its DNS names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The certificate's DNS names (`*.preview.example.com`), lower-case.
    pub names: Vec<String>,
}

impl Certificate {
    /// Whether the certificate serves `host`: one of its names exactly, or one label under a
    /// wildcard name (`*.preview.example.com` serves `42-shop.preview.example.com`, never
    /// `api.42-shop.preview.example.com`), as TLS clients check it (RFC 6125 §6.4.3).
    pub fn serves(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.names.iter().any(|name| match name.strip_prefix("*.") {
            Some(parent) => host
                .split_once('.')
                .is_some_and(|(label, rest)| !label.is_empty() && rest == parent),
            None => *name == host,
        })
    }

    /// Its names, as a refusal lists them.
    pub fn describe(&self) -> String {
        self.names.join(", ")
    }
}

/// The front door of one preview: the certificate its routes serve, who may open it, and where
/// its gate is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Edge {
    /// The wildcard certificate (`--preview-tls-secret`), when one is configured.
    pub tls: Option<Certificate>,
    /// Who may open it: the Blueprint's `access`, else Sandcastle's `--preview-access`.
    pub access: Access,
    /// The gate (`--gate-url`), when one is configured.
    pub gate: Option<Gate>,
}

/// What a request to a preview's host asks the gate for, by its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatePath<'a> {
    /// Back from signing in, with the one-time ticket Sandcastle's sign-in page gave.
    Callback { ticket: &'a str },
    /// A share link being opened.
    Share { token: &'a str },
    /// Leave: the cookie is cleared.
    SignOut,
    /// Another path of the gate's that does not exist.
    Unknown,
    /// The app's own path.
    App,
}

/// What the path (with its query) of a request to a preview's host asks the gate for.
pub fn gate_path(uri: &str) -> GatePath<'_> {
    let Some(rest) = uri.strip_prefix(GATE_PREFIX) else {
        return GatePath::App;
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    match path {
        "callback" => query
            .split('&')
            .find_map(|p| p.strip_prefix("ticket="))
            .filter(|t| !t.is_empty())
            .map_or(GatePath::Unknown, |ticket| GatePath::Callback { ticket }),
        "signout" => GatePath::SignOut,
        _ => match path.strip_prefix("share/") {
            Some(token) if !token.is_empty() && !token.contains('/') => GatePath::Share { token },
            _ => GatePath::Unknown,
        },
    }
}

/// A path on the same host to go to after entering: `path` itself when it is a path of the
/// app's (never another site's, never the gate's own), else `/`.
pub fn local_path(path: &str) -> &str {
    let ok = path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && !path.starts_with(GATE_PREFIX)
        && !path.chars().any(char::is_control);
    if ok { path } else { "/" }
}

/// The `Cookie` header without the gate's own cookie: `None` when nothing else is left.
pub fn without_gate_cookie<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let kept: Vec<&str> = headers
        .into_iter()
        .flat_map(|h| h.split(';'))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .filter(|c| c.split_once('=').map_or(*c, |(n, _)| n.trim()) != GATE_COOKIE)
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// The gate's cookie among `Cookie` headers.
pub fn gate_cookie<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    headers
        .into_iter()
        .flat_map(|h| h.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(n, _)| n.trim() == GATE_COOKIE)
        .map(|(_, v)| v.trim())
}

/// Whether a request wants a page (a browser) rather than an answer for a program.
pub fn wants_page(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("text/html"))
}

/// Whether `host` may be sent a sign-in ticket for a preview whose URL's host is `url_host`:
/// the same host, or a sibling one label under the same parent (a preview's other hosts, as the
/// host template makes them and the wildcard certificate serves them).
pub fn sibling_host(host: &str, url_host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let url_host = url_host.to_ascii_lowercase();
    if host == url_host {
        return true;
    }
    match (host.split_once('.'), url_host.split_once('.')) {
        (Some((a, parent)), Some((_, url_parent))) => {
            !a.is_empty() && parent == url_parent && parent.contains('.')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wildcard() -> Certificate {
        Certificate {
            names: vec![
                "*.preview.example.com".to_owned(),
                "preview.example.com".to_owned(),
            ],
        }
    }

    #[test]
    fn a_wildcard_serves_one_label_under_it() {
        let c = wildcard();
        assert!(c.serves("42-shop.preview.example.com"));
        assert!(c.serves("42-Shop.Preview.Example.com"));
        assert!(c.serves("preview.example.com"));
        assert!(!c.serves("api.42-shop.preview.example.com"));
        assert!(!c.serves("42-shop.preview.example.org"));
        assert!(!c.serves(".preview.example.com"));
        assert!(!c.serves("example.com"));
    }

    #[test]
    fn gate_paths_are_read_from_the_path_and_query() {
        assert_eq!(gate_path("/"), GatePath::App);
        assert_eq!(gate_path("/api/info?x=1"), GatePath::App);
        assert_eq!(gate_path("/.sandcastlex/share/a"), GatePath::App);
        assert_eq!(
            gate_path("/.sandcastle/callback?ticket=abc&rd=%2F"),
            GatePath::Callback { ticket: "abc" }
        );
        assert_eq!(gate_path("/.sandcastle/callback"), GatePath::Unknown);
        assert_eq!(
            gate_path("/.sandcastle/callback?ticket="),
            GatePath::Unknown
        );
        assert_eq!(
            gate_path("/.sandcastle/share/tok123?utm=1"),
            GatePath::Share { token: "tok123" }
        );
        assert_eq!(gate_path("/.sandcastle/share/"), GatePath::Unknown);
        assert_eq!(gate_path("/.sandcastle/share/a/b"), GatePath::Unknown);
        assert_eq!(gate_path("/.sandcastle/signout"), GatePath::SignOut);
        assert_eq!(gate_path("/.sandcastle/other"), GatePath::Unknown);
    }

    #[test]
    fn after_entering_people_stay_on_the_apps_paths() {
        assert_eq!(local_path("/orders/1?x=2"), "/orders/1?x=2");
        assert_eq!(local_path("//evil.example.com/"), "/");
        assert_eq!(local_path("https://evil.example.com/"), "/");
        assert_eq!(local_path("/\\evil"), "/");
        assert_eq!(local_path("/.sandcastle/signout"), "/");
        assert_eq!(local_path("/a\r\nSet-Cookie: x"), "/");
    }

    #[test]
    fn the_gate_cookie_is_found_and_kept_from_the_app() {
        let headers = ["theme=dark; sandcastle_preview=SEALED", "session=app1"];
        assert_eq!(gate_cookie(headers), Some("SEALED"));
        assert_eq!(
            without_gate_cookie(headers).as_deref(),
            Some("theme=dark; session=app1")
        );
        assert_eq!(without_gate_cookie(["sandcastle_preview=x"]), None);
        assert_eq!(gate_cookie(["sandcastle_previewx=1"]), None);
        assert_eq!(gate_cookie([]), None);
    }

    #[test]
    fn pages_are_for_browsers() {
        assert!(wants_page(Some("text/html,application/xhtml+xml")));
        assert!(!wants_page(Some("application/json")));
        assert!(!wants_page(None));
    }

    #[test]
    fn tickets_go_only_to_the_previews_host_or_its_siblings() {
        let url = "42-shop.preview.example.com";
        assert!(sibling_host("42-shop.preview.example.com", url));
        assert!(sibling_host("admin-42-shop.preview.example.com", url));
        assert!(!sibling_host("evil.example.com", url));
        assert!(!sibling_host("x.42-shop.preview.example.com", url));
        assert!(!sibling_host("localhost", "app.localhost"));
        assert!(sibling_host("a.preview.localhost", "b.preview.localhost"));
    }

    #[test]
    fn the_check_url_names_the_preview() {
        let g = Gate {
            provider: GateProvider::Traefik,
            address: "http://sandcastle.sandcastle.svc:8081".to_owned(),
        };
        assert_eq!(
            g.check_url("shop-pr-42"),
            "http://sandcastle.sandcastle.svc:8081/.sandcastle/gate/shop-pr-42"
        );
    }
}
