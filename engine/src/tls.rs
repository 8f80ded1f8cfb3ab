//! The TLS configuration every HTTP client of the process shares.
//!
//! reqwest builds a platform verifier for each client, and that reads and
//! parses every root certificate of the system (about 150 files on Debian)
//! before the client exists: four times before an index run's first request
//! (the start-up check's clients and the run's), tens of milliseconds on its
//! critical path, and an error ("builder error") on a machine without CA
//! certificates even when every server is plain http:// (a local Ollama or
//! vLLM in a slim container). Here the roots are read once, on the first
//! TLS handshake, and never for http:// servers.

use std::sync::{Arc, Once, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// The shared configuration: the platform's roots (loaded on first use), the
/// protocol versions and ALPN (h2, then HTTP/1.1) reqwest would pick itself.
pub(crate) fn client_config() -> ClientConfig {
    static CONFIG: OnceLock<ClientConfig> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = crypto_provider();
            let verifier = Arc::new(LazyPlatformVerifier { provider: provider.clone(), roots: OnceLock::new() });
            let mut config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("the ring provider supports TLS 1.2 and 1.3")
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            config
        })
        .clone()
}

/// The process's rustls crypto provider: ring, installed once as the default.
fn crypto_provider() -> Arc<CryptoProvider> {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    CryptoProvider::get_default().cloned().unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// rustls-platform-verifier's verifier, made at the first certificate to
/// check. Signatures are checked with the provider's algorithms, as that
/// verifier does, without the roots.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    roots: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.roots
            .get_or_init(|| {
                rustls_platform_verifier::Verifier::new(self.provider.clone()).map_err(|e| {
                    rustls::Error::General(format!(
                        "cannot check the server's certificate: no CA certificates could be read from this system ({e}); install the ca-certificates package or set SSL_CERT_FILE to a PEM bundle"
                    ))
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_not_read_until_a_certificate_is_checked() {
        let config = client_config();
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        let verifier = LazyPlatformVerifier { provider: crypto_provider(), roots: OnceLock::new() };
        assert!(!verifier.supported_verify_schemes().is_empty());
        assert!(verifier.roots.get().is_none());
    }
}
