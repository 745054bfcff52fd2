//! "Did you mean ...?" for misspelt keywords, flags and stage names.

/// The candidate closest to `word` (case-insensitive), if it is close
/// enough to be a plausible typo.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word = word.to_lowercase();
    let limit = match word.chars().count() {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    let abbreviates = |c: &str| word.chars().count() >= 3 && c.to_lowercase().starts_with(&word);
    candidates
        .into_iter()
        .map(|c| {
            (
                if abbreviates(c) {
                    0
                } else {
                    strsim::damerau_levenshtein(&word, &c.to_lowercase())
                },
                c,
            )
        })
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// `did you mean `X`?` help text, if something is close.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let kws = ["RUN", "COPY", "WORKDIR", "ENTRYPOINT"];
        assert_eq!(closest("RUNN", kws), Some("RUN"));
        assert_eq!(closest("cpoy", kws), Some("COPY"));
        assert_eq!(closest("WORKDR", kws), Some("WORKDIR"));
        assert_eq!(closest("FROBNICATE", kws), None);
        assert_eq!(closest("", kws), None);
        assert_eq!(closest("entry", kws), Some("ENTRYPOINT"));
    }
}
