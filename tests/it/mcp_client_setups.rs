//! How MCP clients are set up with a bearer token, as docs/mcp.md shows them: the MCP Inspector's
//! CLI (npm, `tests/mcp/package.json`) run for real against `/mcp` — with the header it lists the
//! tools and reads a preview; without it (and without trying an interactive OAuth sign-in) it
//! shows the 401's statement that a Kubernetes bearer token is required — and the configurations the page gives Claude Code, Cursor and Codex (which do
//! not run here: no account, no desktop) read from the page itself, each turned into the URL and
//! header that client sends, and those sent by the Inspector.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::fixtures::TINY_APP;
use crate::support::mcp_clients::clients_dir;
use crate::support::world::{World, sha};

const MCP_DOC: &str = include_str!("../../docs/mcp.md");

/// What the Inspector's CLI printed, and whether it succeeded.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// `mcp-inspector --cli URL --transport http [--header H] ARGS`.
async fn inspector(url: &str, header: Option<&str>, args: &[&str]) -> Ran {
    let bin = clients_dir().join("node_modules/.bin/mcp-inspector");
    assert!(
        bin.exists(),
        "the MCP Inspector is not installed in tests/mcp: run scripts/test-clients (scripts/test does)"
    );
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["--cli", url, "--transport", "http"]);
    if let Some(h) = header {
        cmd.args(["--header", h]);
    }
    let home = std::env::temp_dir().join(format!("sandcastle-inspector-{}", rand::random::<u32>()));
    std::fs::create_dir_all(&home).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        cmd.args(args)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Inspector ends within two minutes")
    .expect("the Inspector runs");
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The first fenced block of docs/mcp.md in `lang` after the line starting with `after`.
fn block(after: &str, lang: &str) -> String {
    let from = MCP_DOC
        .find(after)
        .unwrap_or_else(|| panic!("docs/mcp.md has no {after:?}"));
    let rest = &MCP_DOC[from..];
    let start = rest
        .find(&format!("```{lang}\n"))
        .unwrap_or_else(|| panic!("no {lang} block after {after:?}"))
        + lang.len()
        + 4;
    let end = rest[start..].find("```").unwrap() + start;
    rest[start..end].to_owned()
}

/// (URL, `Authorization` value) each documented client sends, with `token` in `SANDCASTLE_TOKEN`.
fn documented(token: &str) -> Vec<(&'static str, String, String)> {
    let env = |s: &str| {
        s.replace("${env:SANDCASTLE_TOKEN}", token)
            .replace("$SANDCASTLE_TOKEN", token)
    };
    // Claude Code: `claude mcp add --transport http NAME URL --header "Authorization: …"`.
    let claude = block("Claude Code, over HTTP", "sh");
    let line = claude
        .replace("\\\n", " ")
        .lines()
        .find(|l| l.contains("--transport http"))
        .expect("the HTTP setup")
        .to_owned();
    let words: Vec<&str> = line.split_whitespace().collect();
    let url = words
        .iter()
        .find(|w| w.starts_with("https://"))
        .expect("a URL")
        .to_string();
    let header = line
        .split("--header \"")
        .nth(1)
        .and_then(|h| h.split('"').next())
        .expect("a header");
    let claude = (
        "Claude Code",
        url,
        env(header
            .strip_prefix("Authorization: ")
            .expect("Authorization")),
    );
    // Cursor: `mcpServers.sandcastle.{url, headers}`.
    let cursor: Value = serde_json::from_str(&block("Cursor, in", "json")).expect("Cursor's JSON");
    let server = &cursor["mcpServers"]["sandcastle"];
    let cursor = (
        "Cursor",
        server["url"].as_str().unwrap().to_owned(),
        env(server["headers"]["Authorization"].as_str().unwrap()),
    );
    // Codex: `url` and `bearer_token_env_var` (Codex sends `Authorization: Bearer $VAR`).
    let codex = block("Codex, in", "toml");
    let value = |key: &str| {
        codex
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or_else(|| panic!("Codex's {key}"))
            .to_owned()
    };
    assert_eq!(value("bearer_token_env_var"), "SANDCASTLE_TOKEN");
    let codex = ("Codex", value("url"), format!("Bearer {token}"));
    vec![claude, cursor, codex]
}

#[tokio::test]
async fn the_inspector_and_the_documented_setups_connect_with_a_bearer_token() {
    let world = World::new(
        "mcpsetups",
        TINY_APP,
        json!({"host": "{{preview}}.preview.example.com"}),
    )
    .await;
    let admin = account(&world, "admin", &[ALL]).await;
    let made = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(
            json!({"blueprint": "mcpsetups", "repository": world.repo.as_str(),
            "commit": sha().as_str(), "branch": "feature", "name": "mcpsetups-a"}),
        ),
    )
    .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let here = format!("http://{}", world.addr());
    let url = format!("{here}/mcp");

    // Without a token: the 401 says what to send, and the Inspector (kept from trying an
    // interactive OAuth sign-in, which needs a terminal) shows it.
    let refused = inspector(
        &url,
        None,
        &["--method", "tools/list", "--stored-auth-only"],
    )
    .await;
    assert!(!refused.ok, "{}\n{}", refused.stdout, refused.stderr);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        said.contains("send a Kubernetes bearer token"),
        "the refusal is shown: {said}"
    );

    for (client, documented_url, authorization) in documented(&admin) {
        // The page's example host stands for this server.
        let documented_url = documented_url.replace("https://sandcastle.example.com", &here);
        assert_eq!(documented_url, url, "{client}'s URL");
        assert_eq!(
            authorization,
            format!("Bearer {admin}"),
            "{client}'s header"
        );
        let header = format!("Authorization: {authorization}");
        let listed = inspector(&documented_url, Some(&header), &["--method", "tools/list"]).await;
        assert!(listed.ok, "{client}: {}\n{}", listed.stdout, listed.stderr);
        let tools: Value = serde_json::from_str(&listed.stdout)
            .unwrap_or_else(|e| panic!("{client}: {e}: {}", listed.stdout));
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{tools}"))
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&"get_preview"), "{client}: {names:?}");
    }
    let read = inspector(
        &url,
        Some(&format!("Authorization: Bearer {admin}")),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "get_preview",
            "--tool-arg",
            "name=mcpsetups-a",
        ],
    )
    .await;
    assert!(read.ok, "{}\n{}", read.stdout, read.stderr);
    assert!(read.stdout.contains("mcpsetups-a"), "{}", read.stdout);
}
