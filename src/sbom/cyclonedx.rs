//! An [`Inventory`] as a CycloneDX 1.5 JSON BOM.
//!
//! The image is `metadata.component` (type `container`); the base system
//! is an `operating-system` component and every pkg package a `library`
//! component whose `bom-ref` is its purl. `dependencies` lists, for the
//! image and every package, what it depends on. The serial number is a
//! UUID made from the manifest digest, so one image always gets the same.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::{license, purl, sha256_of, Inventory, Package};

const OS_REF: &str = "freebsd-base";

pub fn document(inv: &Inventory) -> Value {
    let image_ref = inv.manifest_digest.to_string();
    let refs: BTreeMap<&str, String> = inv
        .packages
        .iter()
        .map(|p| (p.name.as_str(), purl::of(p)))
        .collect();
    let mut components = Vec::new();
    let mut image_deps: BTreeSet<String> = BTreeSet::new();
    if let Some(release) = &inv.release {
        components.push(json!({
            "type": "operating-system",
            "bom-ref": OS_REF,
            "name": "FreeBSD",
            "version": release,
            "supplier": {"name": "The FreeBSD Project"},
        }));
        image_deps.insert(OS_REF.to_string());
    }
    let mut dependencies = Vec::new();
    for p in &inv.packages {
        let r = &refs[p.name.as_str()];
        components.push(component(p, r));
        image_deps.insert(r.clone());
        let on: BTreeSet<&String> = p
            .deps
            .iter()
            .filter_map(|d| refs.get(d.name.as_str()))
            .collect();
        dependencies.push(json!({"ref": r, "dependsOn": on}));
    }
    dependencies.insert(0, json!({"ref": image_ref, "dependsOn": image_deps}));
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": serial(inv),
        "version": 1,
        "metadata": {
            "timestamp": inv.created,
            "tools": {
                "components": [{
                    "type": "application",
                    "name": "jbuild",
                    "version": env!("CARGO_PKG_VERSION"),
                }],
            },
            "component": {
                "type": "container",
                "bom-ref": image_ref,
                "name": inv.reference,
                "version": inv.manifest_digest.to_string(),
                "hashes": [{"alg": "SHA-256", "content": inv.manifest_digest.hex()}],
            },
        },
        "components": components,
        "dependencies": dependencies,
    })
}

fn component(p: &Package, bom_ref: &str) -> Value {
    let mut v = json!({
        "type": "library",
        "bom-ref": bom_ref,
        "name": p.name,
        "version": p.version,
        "purl": bom_ref,
        "properties": [
            {"name": "freebsd:pkg:origin", "value": p.origin},
            {"name": "freebsd:pkg:arch", "value": p.arch},
        ],
    });
    if !p.comment.is_empty() {
        v["description"] = json!(p.comment);
    }
    if let Some(expr) = license::expression(&p.licenses, p.license_logic) {
        v["licenses"] = json!([{"expression": expr}]);
    }
    if let Some(hex) = p.manifest_digest.as_deref().and_then(sha256_of) {
        v["hashes"] = json!([{"alg": "SHA-256", "content": hex}]);
    }
    if let Some(www) = p.www.as_deref().filter(|w| w.starts_with("http")) {
        v["externalReferences"] = json!([{"type": "website", "url": www}]);
    }
    v
}

/// `urn:uuid:` and a version-5-shaped UUID from the manifest digest.
fn serial(inv: &Inventory) -> String {
    let h = inv.manifest_digest.hex();
    let b = |i: usize| &h[i..i + 1];
    let variant = match u8::from_str_radix(b(16), 16).unwrap_or(0) & 0x3 {
        0 => "8",
        1 => "9",
        2 => "a",
        _ => "b",
    };
    format!(
        "urn:uuid:{}-{}-5{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        variant,
        &h[17..20],
        &h[20..32]
    )
}
