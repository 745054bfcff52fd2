//! The build pipeline through the library alone: one build request to
//! `engine::request::run` builds a recipe, attests its provenance (signed)
//! and pushes the image to a real Distribution registry, with nothing of
//! the command line in between. What it left in the registry is then read
//! back as a peer would: the tag, and the attestation checked against the
//! public key.

use std::fs;

use jbuild::engine::attest::Attest;
use jbuild::engine::provenance::PREDICATE_TYPE;
use jbuild::engine::publish::PushOptions;
use jbuild::engine::request::{self, BuildRequest, BuildSummary};
use jbuild::engine::{BuildEnv, BuildOptions};
use jbuild::keychain::Secret;
use jbuild::layer::Compression;
use jbuild::report::SilentReporter;
use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::store::{ImageName, Store};
use jbuild::transport::{
    block_on, Location, RegistryOptions, RegistryRef, RegistryTransport, Transport, TransportError,
};
use jbuild::trust::{self, RegistryPlace};

use crate::support::registry::Registry;

#[test]
fn one_request_builds_attests_and_pushes_to_a_registry() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(&t.path().join("store")).unwrap();
    let snapshots = DirSnapshotter::new(t.path().join("snapshots")).unwrap();
    let context = t.path().join("context");
    fs::create_dir_all(&context).unwrap();
    fs::write(context.join("hello"), "hello\n").unwrap();
    let jailfile = context.join("Jailfile");
    fs::write(
        &jailfile,
        "FROM scratch\nCOPY hello /hello\nLABEL made=here\n",
    )
    .unwrap();
    let password = Secret::new("pw".to_string());
    let keys = trust::generate_key_pair(&t.path().join("cosign"), &password).unwrap();
    let key = trust::read_signing_key(&keys.private, &mut || Some(password.clone())).unwrap();

    let name = format!("{}/jails/published:1", reg.host());
    let iidfile = t.path().join("iid");
    let req = BuildRequest {
        options: BuildOptions {
            context,
            jailfile,
            tags: vec![ImageName::parse(&name).unwrap()],
            build_args: Default::default(),
            no_cache: false,
            platform: None,
            compression: Compression::Gzip,
            epoch: 0,
            hash_cache: None,
            target: None,
            labels: Default::default(),
            annotations: Default::default(),
            jail_annotations: false,
            mount_cache: None,
            secrets: Default::default(),
            context_source: None,
        },
        text: None,
        platforms: Vec::new(),
        list: None,
        attest: Attest {
            key: Some(&key),
            provenance: true,
            sbom: false,
        },
        iidfile: Some(iidfile.clone()),
        provenance_file: None,
        destinations: vec![name.parse::<Location>().unwrap()],
        push: PushOptions {
            jobs: 2,
            registry: RegistryOptions::default(),
        },
    };
    let env = BuildEnv::new(&store, &snapshots, &SilentReporter);
    let summary = request::run(&env, &req).unwrap();
    let BuildSummary::Image {
        output,
        attested,
        pushed,
    } = summary
    else {
        panic!("one image was asked for, not a list");
    };
    let digest = output.manifest_digest.to_string();
    assert_eq!(
        output.steps_run, 1,
        "COPY; FROM scratch and LABEL run nothing"
    );
    assert_eq!(fs::read_to_string(&iidfile).unwrap(), digest);
    assert_eq!(attested.len(), 1, "{attested:?}");
    assert_eq!(attested[0].digest, digest);
    assert_eq!(pushed.len(), 1, "{pushed:?}");
    assert_eq!(pushed[0].digest, digest);
    assert_eq!(pushed[0].tag.as_deref(), Some("1"));
    assert_eq!(
        pushed[0].place,
        format!("docker://{}/jails/published:1", reg.host())
    );

    // In the registry, as a peer finds it: the image under its tag ...
    let r = RegistryRef::parse(&name).unwrap();
    let remote = RegistryTransport::new(r.clone(), RegistryOptions::default());
    let found = block_on::<_, TransportError>(remote.resolve("1")).unwrap();
    assert_eq!(found.digest().to_string(), digest);
    // ... and its provenance beside it, signed by the key, about it.
    let public = trust::read_public_key(&keys.public).unwrap();
    let place = RegistryPlace::new(r, RegistryOptions::default());
    let statements = trust::verify_attestations(&place, &public, Some(PREDICATE_TYPE)).unwrap();
    assert_eq!(statements.len(), 1, "{statements:?}");
    let hex = digest.strip_prefix("sha256:").unwrap();
    assert!(
        statements[0]
            .subject
            .iter()
            .any(|s| s.digest.get("sha256").map(String::as_str) == Some(hex)),
        "{:?}",
        statements[0].subject
    );
}
