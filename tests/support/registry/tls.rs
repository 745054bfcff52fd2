//! A certificate authority made in the test, and a server certificate for
//! 127.0.0.1 and localhost signed by it.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

pub struct TestCa {
    /// PEM files: the CA certificate, and the server's certificate and key.
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "jbuild test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        leaf.subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let cert = leaf.signed_by(&key, &issuer).unwrap();

        fs::create_dir_all(dir).unwrap();
        let t = TestCa {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
        };
        fs::write(&t.ca_cert, ca_cert.pem()).unwrap();
        fs::write(&t.server_cert, cert.pem()).unwrap();
        fs::write(&t.server_key, key.serialize_pem()).unwrap();
        t
    }
}
