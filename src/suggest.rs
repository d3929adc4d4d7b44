//! "Did you mean …?": the nearest known word to a misspelt one, for keys in `container.json`
//! and `clawmd.json`, group names and skill names.
//!
//! Two strengths: [`nearest`] suggests the closest candidate for a word that is certainly
//! wrong (an unknown group, skill, or settings key), and [`near_miss`] answers only for a
//! word that is almost exactly a known one, so that the runner's own keys in `container.json`
//! (`packages`, `imageTag`, `command`, …) are never taken for typos of clawmd's.

/// Case, `_` and `-` do not count (`mcp_servers` is a near miss of `mcpServers`).
fn normalise(word: &str) -> String {
    word.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

fn distance(a: &str, b: &str) -> usize {
    strsim::damerau_levenshtein(&normalise(a), &normalise(b))
}

/// The candidate closest to `word`, when one is close enough to be what was meant: within a
/// third of the longer word's length (at least one edit). Ties go to the first candidate.
pub fn nearest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    candidates
        .into_iter()
        .filter(|candidate| *candidate != word)
        .map(|candidate| (distance(word, candidate), candidate))
        .filter(|(d, candidate)| *d <= (word.len().max(candidate.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
}

/// The known word `word` almost certainly misspells: at most one edit for words up to six
/// letters, two beyond (ignoring case, `_` and `-`), and not the word itself.
pub fn near_miss<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .filter(|k| **k != word)
        .map(|k| (distance(word, k), *k))
        .filter(|(d, k)| *d <= if k.len() <= 6 { 1 } else { 2 })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_matched_and_other_words_are_not() {
        let keys = ["skills", "mcpServers", "provider"];
        assert_eq!(near_miss("skils", &keys), Some("skills"));
        assert_eq!(near_miss("skill", &keys), Some("skills"));
        assert_eq!(near_miss("mcp_servers", &keys), Some("mcpServers"));
        assert_eq!(near_miss("mcpServer", &keys), Some("mcpServers"));
        assert_eq!(near_miss("providers", &keys), Some("provider"));
        for runner_key in [
            "packages",
            "additionalMounts",
            "imageTag",
            "env",
            "timeout",
            "model",
            "tools",
        ] {
            assert_eq!(near_miss(runner_key, &keys), None, "{runner_key}");
        }
        assert_eq!(
            near_miss("instruction", &["instructions"]),
            Some("instructions")
        );
        assert_eq!(
            near_miss("instrutions", &["instructions"]),
            Some("instructions")
        );
        for server_key in [
            "command",
            "args",
            "env",
            "url",
            "type",
            "headers",
            "description",
        ] {
            assert_eq!(
                near_miss(server_key, &["instructions"]),
                None,
                "{server_key}"
            );
        }
    }

    #[test]
    fn nearest_suggests_close_names_only() {
        let groups = ["main", "research", "ops"];
        assert_eq!(nearest("mian", groups), Some("main"));
        assert_eq!(nearest("reserch", groups), Some("research"));
        assert_eq!(nearest("zzzzzz", groups), None);
        assert_eq!(nearest("githb", ["github", "web"]), Some("github"));
    }
}
