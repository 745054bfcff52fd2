//! An [`Inventory`] as an SPDX 2.3 JSON document.
//!
//! The image is the package the document describes; it CONTAINS the base
//! system (when `/bin/freebsd-version` names it) and every pkg package;
//! each package DEPENDS_ON the installed packages pkg recorded as its
//! dependencies. License names of the ports tree without an SPDX
//! identifier are `LicenseRef-freebsd-…`, described in
//! `hasExtractedLicensingInfos`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::{license, purl, sha256_of, Inventory, Package};

const DOCUMENT: &str = "SPDXRef-DOCUMENT";
const IMAGE: &str = "SPDXRef-Image";
const OS: &str = "SPDXRef-OperatingSystem";
const NOASSERTION: &str = "NOASSERTION";

pub fn document(inv: &Inventory) -> Value {
    let ids = package_ids(&inv.packages);
    let mut packages = vec![json!({
        "SPDXID": IMAGE,
        "name": inv.reference,
        "versionInfo": inv.manifest_digest.to_string(),
        "downloadLocation": NOASSERTION,
        "filesAnalyzed": false,
        "primaryPackagePurpose": "CONTAINER",
        "checksums": [{"algorithm": "SHA256", "checksumValue": inv.manifest_digest.hex()}],
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": NOASSERTION,
        "copyrightText": NOASSERTION,
    })];
    let mut relationships: BTreeSet<(String, &str, String)> = BTreeSet::new();
    relationships.insert((DOCUMENT.into(), "DESCRIBES", IMAGE.into()));
    if let Some(release) = &inv.release {
        packages.push(json!({
            "SPDXID": OS,
            "name": "FreeBSD",
            "versionInfo": release,
            "supplier": "Organization: The FreeBSD Project",
            "downloadLocation": NOASSERTION,
            "filesAnalyzed": false,
            "primaryPackagePurpose": "OPERATING_SYSTEM",
            "licenseConcluded": NOASSERTION,
            "licenseDeclared": NOASSERTION,
            "copyrightText": NOASSERTION,
        }));
        relationships.insert((IMAGE.into(), "CONTAINS", OS.into()));
    }
    for p in &inv.packages {
        let id = &ids[&p.name];
        packages.push(package(p, id));
        relationships.insert((IMAGE.into(), "CONTAINS", id.clone()));
        for d in &p.deps {
            if let Some(dep) = ids.get(&d.name) {
                relationships.insert((id.clone(), "DEPENDS_ON", dep.clone()));
            }
        }
    }
    let unlisted: BTreeSet<&String> = inv
        .packages
        .iter()
        .flat_map(|p| license::unlisted(&p.licenses))
        .collect();
    let mut doc = json!({
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": DOCUMENT,
        "name": format!("{} (jbuild sbom)", inv.reference),
        "documentNamespace": format!(
            "https://jbuild.invalid/spdx/sha256-{}",
            inv.manifest_digest.hex()
        ),
        "creationInfo": {
            "created": inv.created,
            "creators": [format!("Tool: jbuild-{}", env!("CARGO_PKG_VERSION"))],
        },
        "packages": packages,
        "relationships": relationships
            .into_iter()
            .map(|(a, kind, b)| json!({
                "spdxElementId": a,
                "relationshipType": kind,
                "relatedSpdxElement": b,
            }))
            .collect::<Vec<_>>(),
    });
    if !unlisted.is_empty() {
        doc["hasExtractedLicensingInfos"] = unlisted
            .into_iter()
            .map(|name| {
                json!({
                    "licenseId": license::license_ref(name),
                    "name": name,
                    "extractedText": format!(
                        "The license the FreeBSD ports tree calls `{name}`; \
                         the port's LICENSE_FILE has its text."
                    ),
                })
            })
            .collect();
    }
    doc
}

fn package(p: &Package, id: &str) -> Value {
    let declared = license::expression(&p.licenses, p.license_logic)
        .unwrap_or_else(|| NOASSERTION.to_string());
    let mut v = json!({
        "SPDXID": id,
        "name": p.name,
        "versionInfo": p.version,
        "downloadLocation": NOASSERTION,
        "filesAnalyzed": false,
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": declared,
        "copyrightText": NOASSERTION,
        "sourceInfo": format!("built from the FreeBSD ports tree's {}", p.origin),
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": purl::of(p),
        }],
    });
    if !p.comment.is_empty() {
        v["summary"] = json!(p.comment);
    }
    if let Some(www) = p.www.as_deref().filter(|w| is_url(w)) {
        v["homepage"] = json!(www);
    }
    if let Some(hex) = p.manifest_digest.as_deref().and_then(sha256_of) {
        v["checksums"] = json!([{"algorithm": "SHA256", "checksumValue": hex}]);
        v["comment"] = json!("The checksum is pkg(8)'s digest of the package's manifest.");
    }
    v
}

fn is_url(s: &str) -> bool {
    (s.starts_with("https://") || s.starts_with("http://")) && !s.contains(char::is_whitespace)
}

/// An SPDX identifier per package: `SPDXRef-Package-<name>`, with what an
/// identifier may not hold as `-`; two names that come out alike get
/// `-2`, `-3`… in name order.
fn package_ids(packages: &[Package]) -> BTreeMap<String, String> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut ids = BTreeMap::new();
    let mut names: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    for name in names {
        let base = format!("SPDXRef-Package-{}", license::idstring(name));
        let mut id = base.clone();
        let mut n = 2;
        while used.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        used.insert(id.clone());
        ids.insert(name.to_string(), id);
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_ids_are_spdx_idstrings_and_stay_apart() {
        let ids = package_ids(&[
            Package::named("gtk-"),
            Package::named("gtk+"),
            Package::named("py311-foo_bar"),
        ]);
        assert_eq!(ids["gtk+"], "SPDXRef-Package-gtk-");
        assert_eq!(ids["gtk-"], "SPDXRef-Package-gtk--2");
        assert_eq!(ids["py311-foo_bar"], "SPDXRef-Package-py311-foo-bar");
    }
}
