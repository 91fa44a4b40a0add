//! TLS for NBD (`NBD_OPT_STARTTLS`, as qemu-nbd and nbdkit serve it) with rustls:
//! loading the server's certificate and key, and optionally the CA that client
//! certificates must chain to. x509 only: rustls offers no external pre-shared keys
//! (PSK), so qemu's `tls-creds-psk` is not served.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::{TlsConfig, TlsMode};
use crate::error::{Error, Result};

/// Largest PEM file read (a certificate chain or a CA bundle is tens of KB).
pub const MAX_PEM_BYTES: u64 = 4 << 20;

/// The bytes of the PEM file at `path` (config key `key`): a regular file of at most
/// [`MAX_PEM_BYTES`]. `--tls-cert /dev/zero` was read until memory ran out.
fn pem_bytes(path: &Path, key: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let bad = |why: String| Error::Config(format!("tls.{key}: {}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot read it ({e})")))?;
    if !meta.is_file() {
        return Err(bad("not a regular file (expected a PEM file)".into()));
    }
    let mut data = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PEM_BYTES + 1).read_to_end(&mut data))
        .map_err(|e| bad(format!("cannot read it ({e})")))?;
    if data.len() as u64 > MAX_PEM_BYTES {
        return Err(bad(format!("larger than {} MiB: not a PEM file", MAX_PEM_BYTES >> 20)));
    }
    Ok(data)
}

fn certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |why: String| Error::Config(format!("tls.{key}: {}: {why}", path.display()));
    let data = pem_bytes(path, key)?;
    let certs = CertificateDer::pem_slice_iter(&data)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(bad("no certificate in the file (expected -----BEGIN CERTIFICATE-----)".into()));
    }
    Ok(certs)
}

/// The TLS acceptor `tls` asks for (`None` when TLS is off). Every file is read and
/// checked here, before anything is served: a certificate that does not load, a key
/// that does not match it, a client CA with no certificate are one-line errors naming
/// the key and the file.
pub fn acceptor(tls: &TlsConfig) -> Result<Option<TlsAcceptor>> {
    if tls.mode == TlsMode::Off {
        return Ok(None);
    }
    let need = |v: &Option<std::path::PathBuf>, key: &str| {
        v.clone().ok_or_else(|| Error::Config(format!("tls.{key}: required when TLS is on (a PEM file)")))
    };
    let (cert_path, key_path) = (need(&tls.cert, "cert")?, need(&tls.key, "key")?);
    let chain = certs(&cert_path, "cert")?;
    let key = PrivateKeyDer::from_pem_slice(&pem_bytes(&key_path, "key")?)
        .map_err(|e| Error::Config(format!("tls.key: {}: not a PEM private key ({e})", key_path.display())))?;
    let provider = Arc::new(provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("tls: {e}")))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs(ca, "client_ca")? {
                roots.add(c).map_err(|e| Error::Config(format!("tls.client_ca: {}: {e}", ca.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| Error::Config(format!("tls.client_ca: {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        Error::Config(format!(
            "tls: the key {} does not go with the certificate {} ({e})",
            key_path.display(),
            cert_path.display()
        ))
    })?;
    // The server's order of cipher suites (AES-128-GCM first) rather than the client's.
    config.ignore_client_order = true;
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// rustls's ring provider with AES-128-GCM preferred: as safe as AES-256-GCM for this
/// use, and faster (the gateway encrypts on the thread that also schedules; 64 KiB
/// reads over TLS ran at 0.72 of plain with AES-256-GCM, which gnutls clients ask first).
fn provider() -> rustls::crypto::CryptoProvider {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.sort_by_key(|s| match s.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 1,
        _ => 2,
    });
    p
}
