//! The ports tree's license names (`Mk/bsd.licenses.db.mk`: `BSD2CLAUSE`,
//! `GPLv2+`, …) as SPDX license expressions.
//!
//! A name with an SPDX identifier becomes it; any other becomes
//! `LicenseRef-freebsd-<name>` (SPDX's form for a license without an
//! identifier), which an SPDX document then describes in
//! `hasExtractedLicensingInfos`. pkg's `licenselogic` joins a package's
//! licenses: `|` (dual licensed) with OR, `&` (multi) with AND.

/// pkg's `LICENSE_OR` (`'|'`).
pub const LOGIC_OR: i64 = b'|' as i64;
/// pkg's `LICENSE_AND` (`'&'`).
pub const LOGIC_AND: i64 = b'&' as i64;

/// Ports names and their SPDX expressions.
const KNOWN: &[(&str, &str)] = &[
    ("AGPLv3", "AGPL-3.0-only"),
    ("AGPLv3+", "AGPL-3.0-or-later"),
    ("APACHE10", "Apache-1.0"),
    ("APACHE11", "Apache-1.1"),
    ("APACHE20", "Apache-2.0"),
    ("ART10", "Artistic-1.0"),
    ("ART20", "Artistic-2.0"),
    ("ARTPERL10", "Artistic-1.0-Perl"),
    ("BSD0CLAUSE", "0BSD"),
    ("BSD2CLAUSE", "BSD-2-Clause"),
    ("BSD3CLAUSE", "BSD-3-Clause"),
    ("BSD4CLAUSE", "BSD-4-Clause"),
    ("BSL", "BSL-1.0"),
    ("CDDL", "CDDL-1.0"),
    ("ClArtistic", "ClArtistic"),
    ("EPL", "EPL-1.0"),
    ("GPLv1", "GPL-1.0-only"),
    ("GPLv1+", "GPL-1.0-or-later"),
    ("GPLv2", "GPL-2.0-only"),
    ("GPLv2+", "GPL-2.0-or-later"),
    ("GPLv3", "GPL-3.0-only"),
    ("GPLv3+", "GPL-3.0-or-later"),
    ("GPLv3RLE", "GPL-3.0-only WITH GCC-exception-3.1"),
    ("GPLv3RLE+", "GPL-3.0-or-later WITH GCC-exception-3.1"),
    ("ISCL", "ISC"),
    ("LGPL20", "LGPL-2.0-only"),
    ("LGPL20+", "LGPL-2.0-or-later"),
    ("LGPL21", "LGPL-2.1-only"),
    ("LGPL21+", "LGPL-2.1-or-later"),
    ("LGPL3", "LGPL-3.0-only"),
    ("LGPL3+", "LGPL-3.0-or-later"),
    ("LPPL10", "LPPL-1.0"),
    ("LPPL11", "LPPL-1.1"),
    ("LPPL12", "LPPL-1.2"),
    ("LPPL13a", "LPPL-1.3a"),
    ("LPPL13c", "LPPL-1.3c"),
    ("MIT", "MIT"),
    ("MPL10", "MPL-1.0"),
    ("MPL11", "MPL-1.1"),
    ("MPL20", "MPL-2.0"),
    ("NCSA", "NCSA"),
    ("OFL10", "OFL-1.0"),
    ("OFL11", "OFL-1.1"),
    ("OpenSSL", "OpenSSL"),
    ("PHP30", "PHP-3.0"),
    ("PHP301", "PHP-3.01"),
    ("PostgreSQL", "PostgreSQL"),
    ("PSFL", "PSF-2.0"),
    ("RUBY", "Ruby"),
    ("UNLICENSE", "Unlicense"),
    ("WTFPL", "WTFPL"),
    ("ZLIB", "Zlib"),
    ("ZPL21", "ZPL-2.1"),
];

/// One ports license name as an SPDX expression (or `LicenseRef-…`).
pub fn spdx(name: &str) -> String {
    if let Some((_, id)) = KNOWN.iter().find(|(n, _)| *n == name) {
        return (*id).to_string();
    }
    // The ports tree names the Creative Commons licenses as SPDX does.
    let creative = (name.starts_with("CC-") || name.starts_with("CC0-"))
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if creative {
        return name.to_string();
    }
    license_ref(name)
}

/// `LicenseRef-freebsd-<name>`, as an SPDX idstring.
pub fn license_ref(name: &str) -> String {
    format!("LicenseRef-freebsd-{}", idstring(name))
}

/// `name` with what SPDX does not allow in an idstring (anything but
/// letters, digits, `.` and `-`) as `-`.
pub fn idstring(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A package's declared license: its licenses joined as `logic` says;
/// `None` when there is none, or several joined by a logic pkg does not
/// define (the document then says NOASSERTION).
pub fn expression(licenses: &[String], logic: i64) -> Option<String> {
    let parts: Vec<String> = licenses.iter().map(|l| spdx(l)).collect();
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => {
            let op = match logic {
                LOGIC_OR => " OR ",
                LOGIC_AND => " AND ",
                _ => return None,
            };
            let wrapped: Vec<String> = parts
                .into_iter()
                .map(|p| if p.contains(' ') { format!("({p})") } else { p })
                .collect();
            Some(wrapped.join(op))
        }
    }
}

/// The ports names among `licenses` that have no SPDX identifier.
pub fn unlisted(licenses: &[String]) -> impl Iterator<Item = &String> {
    licenses
        .iter()
        .filter(|l| spdx(l).starts_with("LicenseRef-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn license_logic_joins_with_or_and_and() {
        assert_eq!(expression(&v(&["MIT"]), 1).as_deref(), Some("MIT"));
        assert_eq!(
            expression(&v(&["GPLv2+", "MIT"]), LOGIC_OR).as_deref(),
            Some("GPL-2.0-or-later OR MIT")
        );
        assert_eq!(
            expression(&v(&["BSD2CLAUSE", "GPLv3RLE"]), LOGIC_AND).as_deref(),
            Some("BSD-2-Clause AND (GPL-3.0-only WITH GCC-exception-3.1)")
        );
        assert_eq!(expression(&[], 1), None);
        assert_eq!(expression(&v(&["MIT", "ISCL"]), 7), None);
    }

    #[test]
    fn names_without_an_spdx_id_become_license_refs() {
        assert_eq!(spdx("PD"), "LicenseRef-freebsd-PD");
        assert_eq!(spdx("Some License+"), "LicenseRef-freebsd-Some-License-");
        assert_eq!(spdx("CC-BY-4.0"), "CC-BY-4.0");
    }
}
