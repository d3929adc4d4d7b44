//! Names Kubernetes accepts, made from names clawmd accepts: DNS labels (a Pod's name, a
//! volume's), ConfigMap keys. Each is the name itself when it already is one, else a stable
//! rewrite with a short hash of the original, so two names never meet and the same name
//! always gives the same object.

use sha2::{Digest, Sha256};

/// The longest DNS label (RFC 1123): a Pod's name as a hostname, a volume's name.
pub const MAX_LABEL: usize = 63;

/// The longest ConfigMap key (a DNS subdomain's length).
pub const MAX_KEY: usize = 253;

/// Whether `text` is an RFC 1123 DNS label: 1 to 63 of `a-z`, `0-9` and `-`, starting and
/// ending with a letter or digit.
pub fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Whether `text` is a ConfigMap key (the API server's `IsConfigMapKey`): 1 to 253 of
/// `A-Za-z0-9`, `-`, `_` and `.`, neither `.` nor `..`, not starting with `..`.
pub fn is_configmap_key(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_KEY
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && text != "."
        && !text.starts_with("..")
}

/// `text` lowercased, every run of bytes outside `a-z0-9` one `-`, no `-` at either end.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The first 8 hex digits of the SHA-256 of `text`.
fn hash8(text: &str) -> String {
    crate::safe_name::hex(&Sha256::digest(text.as_bytes())[..4])
}

/// `text` as a DNS label of at most `max` bytes (`max` ≥ 9): itself when it is one, else
/// [`sanitize`]d, cut to leave room, and followed by `-` and a hash of `text` (so `Main`,
/// `main.` and `main_` never become `main`, nor one another).
pub fn dns_label(text: &str, max: usize) -> String {
    debug_assert!((9..=MAX_LABEL).contains(&max));
    if is_dns_label(text) && text.len() <= max {
        return text.to_owned();
    }
    let hash = hash8(text);
    let mut body = sanitize(text);
    body.truncate(max - hash.len() - 1);
    while body.ends_with('-') {
        body.pop();
    }
    match body.is_empty() {
        true => hash,
        false => format!("{body}-{hash}"),
    }
}

/// A DNS label of at most `max` bytes for a path (`/etc/claude-code` is `etc-claude-code`):
/// [`sanitize`]d, with a hash only when it must be cut.
pub fn path_label(path: &str, max: usize) -> String {
    let clean = sanitize(path);
    match clean.len() <= max && !clean.is_empty() {
        true => clean,
        false => dns_label(&clean, max),
    }
}

/// `name` as a ConfigMap key: itself when it is one, else every byte outside the key's
/// alphabet (`/` included) written `_`, a leading `.` kept only once, and a hash of `name`
/// after it (so keys never meet).
pub fn configmap_key(name: &str) -> String {
    if is_configmap_key(name) {
        return name.to_owned();
    }
    let mut out: String = name
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                true => c,
                false => '_',
            },
        )
        .collect();
    while out.starts_with("..") {
        out.remove(0);
    }
    out.truncate(MAX_KEY - 9);
    format!("{out}_{}", hash8(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_label_stays_and_anything_else_is_rewritten_with_a_hash() {
        assert_eq!(dns_label("main", MAX_LABEL), "main");
        assert_eq!(dns_label("ops-2", MAX_LABEL), "ops-2");
        let upper = dns_label("Main", MAX_LABEL);
        assert!(upper.starts_with("main-") && upper.len() == 13, "{upper}");
        assert_ne!(dns_label("main_", MAX_LABEL), dns_label("main.", MAX_LABEL));
        assert_eq!(dns_label("___", MAX_LABEL).len(), 8);
        let long = "a".repeat(200);
        assert_eq!(dns_label(&long, MAX_LABEL).len(), MAX_LABEL);
        assert_eq!(path_label("/etc/claude-code", 56), "etc-claude-code");
        assert_eq!(
            path_label("/workspace/agent/.claude-fragments", 56),
            "workspace-agent-claude-fragments"
        );
        assert_eq!(configmap_key("CLAUDE.md"), "CLAUDE.md");
        assert!(is_configmap_key(&configmap_key("opencode/.gitignore")));
        assert!(is_configmap_key(&configmap_key("..x")));
        assert!(is_configmap_key(&configmap_key("mcp-a%20b.md")));
    }

    proptest! {
        /// Any group name clawmd accepts gives a DNS label, the same every time, and two
        /// names never give the same one.
        #[test]
        fn every_accepted_group_name_is_a_stable_distinct_label(
            a in "[A-Za-z0-9][A-Za-z0-9._-]{0,120}",
            b in "[A-Za-z0-9][A-Za-z0-9._-]{0,120}",
        ) {
            prop_assume!(crate::safe_name::validate_name(&a).is_ok());
            let label = dns_label(&a, MAX_LABEL);
            prop_assert!(is_dns_label(&label), "{a:?} -> {label:?}");
            prop_assert_eq!(&label, &dns_label(&a, MAX_LABEL));
            if a != b {
                prop_assert_ne!(label, dns_label(&b, MAX_LABEL));
            }
        }

        #[test]
        fn every_file_name_gives_a_key(name in "[^\u{0}]{1,300}") {
            prop_assert!(is_configmap_key(&configmap_key(&name)));
        }
    }
}
