//! Deterministic JSON: the bytes of every document jbuild writes.
//!
//! oci-spec keeps labels, annotations and exposed ports in `HashMap`s, whose
//! order changes from run to run. A digest is taken over bytes, so every
//! JSON document jbuild writes goes through [`canonical_json`]: serialised
//! into a `serde_json::Value` first, whose objects are `BTreeMap`s — keys in
//! byte order — as long as serde_json's `preserve_order` feature is off.
//! Nothing in the dependency graph enables it today (`cargo tree -e features
//! -i serde_json`); the test `serde_json_objects_are_sorted` fails the day
//! something does.

use serde::Serialize;

/// `v` as compact JSON with object keys in byte order.
///
/// # Panics
///
/// If `v` cannot be represented as JSON (a map with non-string keys): a bug
/// in the caller's type, not a condition of the input.
pub fn canonical_json<T: Serialize>(v: &T) -> Vec<u8> {
    let value = serde_json::to_value(v).expect("value serialisable as JSON");
    serde_json::to_vec(&value).expect("a JSON value always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::image::{ConfigBuilder, ImageConfigurationBuilder};
    use std::collections::HashMap;

    #[test]
    fn serde_json_objects_are_sorted() {
        let mut m = serde_json::Map::new();
        m.insert("b".into(), 1.into());
        m.insert("a".into(), 2.into());
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"a":2,"b":1}"#,
            "serde_json's preserve_order got enabled"
        );
    }

    #[test]
    fn canonical_json_is_deterministic_with_hashmaps() {
        let make = |order: &[usize]| {
            let keys: Vec<String> = (0..40).map(|i| format!("label.{i}")).collect();
            let mut labels = HashMap::new();
            for &i in order {
                labels.insert(keys[i].clone(), format!("v{i}"));
            }
            let ports: Vec<String> = order.iter().map(|i| format!("{}/tcp", 1000 + i)).collect();
            let config = ConfigBuilder::default()
                .labels(labels)
                .exposed_ports(ports)
                .build()
                .unwrap();
            let c = ImageConfigurationBuilder::default()
                .config(config)
                .build()
                .unwrap();
            canonical_json(&c)
        };
        let forward: Vec<usize> = (0..40).collect();
        let backward: Vec<usize> = (0..40).rev().collect();
        let a = make(&forward);
        assert_eq!(a, make(&backward));
        let text = String::from_utf8(a).unwrap();
        assert!(text.find("label.0").unwrap() < text.find("label.1\"").unwrap());
        assert!(!text.contains(' ') && !text.contains('\n'));
    }
}
