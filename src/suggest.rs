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

/// The most edits [`nearest`] accepts between words of these lengths: a third of the longer
/// one's length, at least one.
fn allowed(word: &str, candidate: &str) -> usize {
    (word.len().max(candidate.len()) / 3).max(1)
}

/// The candidate closest to `word`, when one is close enough to be what was meant: within a
/// third of the longer word's length (at least one edit). Ties go to the first candidate.
pub fn nearest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    closest(word, candidates, |candidate| allowed(word, candidate))
}

/// The known word `word` almost certainly misspells: at most one edit for words up to six
/// letters, two beyond (ignoring case, `_` and `-`), and not the word itself.
pub fn near_miss<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    closest(word, known.iter().copied(), |k| {
        if k.len() <= 6 { 1 } else { 2 }
    })
}

/// The candidate (not `word` itself) nearest to `word` within `limit(candidate)` edits of the
/// normalised words; ties go to the first.
///
/// The edit distance is at least the difference in length (of the normalised words), so a
/// candidate of a length too different is passed over without computing it: the cost is
/// linear in the candidates plus a distance for each one of a similar length (the runner's
/// keys are checked at every spawn).
fn closest<'a, I>(word: &str, candidates: I, limit: impl Fn(&str) -> usize) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let normal = normalise(word);
    let length = normal.chars().count();
    candidates
        .into_iter()
        .filter(|candidate| *candidate != word)
        .filter_map(|candidate| {
            let other = normalise(candidate);
            let limit = limit(candidate);
            if length.abs_diff(other.chars().count()) > limit {
                return None;
            }
            let d = strsim::damerau_levenshtein(&normal, &other);
            (d <= limit).then_some((d, candidate))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
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
