//! The check of a registry's TLS certificate, with the CA certificates it
//! trusts loaded at the first certificate it checks rather than when the
//! HTTP client is made.
//!
//! The system's CA certificates are a bundle of some 150 certificates, and
//! on Linux a directory of as many files beside it; reading and parsing them
//! costs more than a whole small copy from a loopback registry, which speaks
//! plain HTTP and never shows a certificate. So the client is made with this
//! verifier, and a registry that answers over TLS pays for the bundle once,
//! at its first handshake. (reqwest's own set-up reads the bundle when the
//! client is built.)
//!
//! What is trusted is what reqwest would trust: the system's certificates
//! (rustls-platform-verifier) and those of docker's `certs.d` (or
//! `--cert-dir`) beside them. A system with none trusts `certs.d`'s alone,
//! with a warning, so a `--cert-dir` registry still works and any other
//! HTTPS registry fails with the unknown-issuer advice.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

/// A [`ServerCertVerifier`] that builds the real one (the system's CA
/// certificates and `extra`) the first time a certificate is checked.
#[derive(Debug)]
pub struct LazyVerifier {
    provider: Arc<CryptoProvider>,
    extra: Vec<CertificateDer<'static>>,
    /// `None`: no CA certificate at all, so every issuer is unknown.
    inner: OnceLock<Option<Arc<dyn ServerCertVerifier>>>,
}

impl LazyVerifier {
    pub fn new(provider: Arc<CryptoProvider>, extra: Vec<CertificateDer<'static>>) -> Self {
        LazyVerifier {
            provider,
            extra,
            inner: OnceLock::new(),
        }
    }

    fn build(&self) -> Option<Arc<dyn ServerCertVerifier>> {
        tracing::debug!("loading the system's CA certificates");
        let system = rustls_platform_verifier::Verifier::new_with_extra_roots(
            self.extra.iter().cloned(),
            self.provider.clone(),
        );
        match system {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "no CA certificates from the system: trusting only those of certs.d or --cert-dir"
                );
                let mut roots = RootCertStore::empty();
                roots.add_parsable_certificates(self.extra.iter().cloned());
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                    .build()
                    .ok()
                    .map(|v| v as Arc<dyn ServerCertVerifier>)
            }
        }
    }
}

impl ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.inner.get_or_init(|| self.build()) {
            Some(v) => {
                v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
        }
    }

    // The handshake's signatures are checked with the certificate's own key:
    // no CA certificate is needed for them.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `--tls-verify=false`: any certificate, and any handshake signature, is
/// accepted (reqwest's `danger_accept_invalid_certs`, which a preconfigured
/// TLS set-up does not apply).
#[derive(Debug)]
pub struct AcceptsAnything(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptsAnything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
