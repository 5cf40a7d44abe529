//! Identifier newtypes that validate on construction: `RepoName`, `PrNumber`, `Sha`,
//! `BranchName`, `NamespaceName`. Past the edges of the program only these travel, never raw strings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::quote::short;

/// Why a string is not a valid identifier. The message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("repository name {:?} is not of the form owner/name", short(.0))]
    Repo(String),
    #[error("pull request number {:?} is not a positive integer", short(.0))]
    Pr(String),
    #[error("commit {:?} is not a 40-character hexadecimal SHA", short(.0))]
    Sha(String),
    #[error(
        "branch {:?} is not a branch name Git accepts (no spaces, control or bidirectional-text \
         characters, `~^:?*[\\`, `..` or `@{{`)",
        short(.0)
    )]
    Branch(String),
    #[error(
        "{:?} is not a valid namespace name (DNS-1123 label: a-z, 0-9 and '-', at most 63 characters)",
        short(.0)
    )]
    Namespace(String),
}

fn is_repo_part(s: &str, allow_dot: bool) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || (allow_dot && c == '.'))
}

/// A GitHub repository `owner/name`, lower-cased (GitHub treats names case-insensitively).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoName {
    full: String,
    slash: usize,
}

impl RepoName {
    pub fn new(s: &str) -> Result<Self, IdError> {
        let lower = s.trim().to_ascii_lowercase();
        let Some((owner, name)) = lower.split_once('/') else {
            return Err(IdError::Repo(s.to_owned()));
        };
        if !is_repo_part(owner, false) || !is_repo_part(name, true) || owner.len() > 39 {
            return Err(IdError::Repo(s.to_owned()));
        }
        let slash = owner.len();
        Ok(Self { full: lower, slash })
    }

    pub fn owner(&self) -> &str {
        &self.full[..self.slash]
    }

    pub fn name(&self) -> &str {
        &self.full[self.slash + 1..]
    }

    pub fn as_str(&self) -> &str {
        &self.full
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl FromStr for RepoName {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for RepoName {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(&s)
    }
}

impl From<RepoName> for String {
    fn from(r: RepoName) -> Self {
        r.full
    }
}

/// A pull request number (positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct PrNumber(u64);

impl PrNumber {
    pub fn new(n: u64) -> Result<Self, IdError> {
        if n == 0 || n > i32::MAX as u64 {
            return Err(IdError::Pr(n.to_string()));
        }
        Ok(Self(n))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for PrNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for PrNumber {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s
            .trim()
            .parse::<u64>()
            .map_err(|_| IdError::Pr(s.to_owned()))?;
        Self::new(n)
    }
}

impl TryFrom<u64> for PrNumber {
    type Error = IdError;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        Self::new(n)
    }
}

impl From<PrNumber> for u64 {
    fn from(p: PrNumber) -> Self {
        p.0
    }
}

/// A full 40-character commit SHA, lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Sha(String);

impl Sha {
    pub fn new(s: &str) -> Result<Self, IdError> {
        let lower = s.trim().to_ascii_lowercase();
        if lower.len() != 40 || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(IdError::Sha(s.to_owned()));
        }
        Ok(Self(lower))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 7-character abbreviation GitHub shows.
    pub fn short(&self) -> &str {
        &self.0[..7]
    }
}

impl fmt::Display for Sha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Sha {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for Sha {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(&s)
    }
}

impl From<Sha> for String {
    fn from(s: Sha) -> Self {
        s.0
    }
}

/// A branch name as Git accepts it (see [`is_branch_name`]), kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BranchName(String);

impl BranchName {
    pub fn new(s: &str) -> Result<Self, IdError> {
        if is_branch_name(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::Branch(s.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BranchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for BranchName {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(&s)
    }
}

impl From<BranchName> for String {
    fn from(b: BranchName) -> Self {
        b.0
    }
}

/// A Kubernetes namespace (or any DNS-1123 label) name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NamespaceName(String);

impl NamespaceName {
    pub const MAX_LEN: usize = 63;

    pub fn new(s: &str) -> Result<Self, IdError> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::Namespace(s.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NamespaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for NamespaceName {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(&s)
    }
}

impl From<NamespaceName> for String {
    fn from(n: NamespaceName) -> Self {
        n.0
    }
}

/// Whether `s` is a branch name Git accepts (`git check-ref-format --branch`'s rules) within
/// GitHub's 255 bytes: no empty, `.`-led or `.lock`-ended component, no `..`, `@{`, `//`,
/// control characters, spaces or any of `~^:?*[\`, not `@`, not ending in `/` or `.`. Git
/// refuses ASCII control characters; Sandcastle refuses their Unicode kin too, the invisible
/// characters that reorder or break the text around them (see [`is_invisible_control`]).
pub fn is_branch_name(s: &str) -> bool {
    let bad_char = |c: char| c.is_control() || is_invisible_control(c) || " ~^:?*[\\".contains(c);
    !s.is_empty()
        && s.len() <= 255
        && s != "@"
        && !s.contains("..")
        && !s.contains("@{")
        && !s.ends_with('.')
        && !s.chars().any(bad_char)
        && s.split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with(".lock"))
}

/// Unicode's bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and
/// its line and paragraph separators: invisible, they make a name read as another
/// (`fix/<U+202E>gnp.exe` shows as `fix/exe.png`) wherever it is shown.
pub fn is_invisible_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names_normalise_and_validate() {
        let r = RepoName::new("Acme/Shop.web").unwrap();
        assert_eq!(r.as_str(), "acme/shop.web");
        assert_eq!(r.owner(), "acme");
        assert_eq!(r.name(), "shop.web");
        for bad in [
            "acme",
            "/shop",
            "acme/",
            "ac me/shop",
            "acme/shop/x",
            "a.b/shop",
            "acme/..",
            "",
        ] {
            assert!(RepoName::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn pr_numbers_are_positive() {
        assert_eq!("42".parse::<PrNumber>().unwrap().get(), 42);
        assert!("0".parse::<PrNumber>().is_err());
        assert!("-3".parse::<PrNumber>().is_err());
        assert!("x".parse::<PrNumber>().is_err());
    }

    #[test]
    fn shas_are_forty_hex_digits() {
        let s = Sha::new("E4D2FB5E8E4C5F9C5A2E0F0F1D6E6E7C8B9A0B1C").unwrap();
        assert_eq!(s.as_str(), "e4d2fb5e8e4c5f9c5a2e0f0f1d6e6e7c8b9a0b1c");
        assert_eq!(s.short(), "e4d2fb5");
        assert!(Sha::new("e4d2fb5").is_err());
        assert!(Sha::new(&"g".repeat(40)).is_err());
    }

    #[test]
    fn namespace_names_are_dns_labels() {
        assert!(NamespaceName::new("shop-pr-42").is_ok());
        for bad in ["", "-a", "a-", "Shop", "a_b", &"a".repeat(64)] {
            assert!(NamespaceName::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn serde_round_trips_validate() {
        let r: RepoName = serde_json::from_str("\"Octo/Cat\"").unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"octo/cat\"");
        assert!(serde_json::from_str::<RepoName>("\"nope\"").is_err());
        assert!(serde_json::from_str::<PrNumber>("0").is_err());
    }
}
