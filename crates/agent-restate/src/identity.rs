//! Verification of Restate's request identity (Ed25519-signed JWTs) with `ring`.
//!
//! The SDK verifies request identity with `jsonwebtoken`, which since version
//! 10 needs a process-wide crypto provider: without one, the first signed
//! request panics inside the SDK and the worker answers no signed request at
//! all. This provider verifies the one algorithm Restate signs with (EdDSA,
//! Ed25519) with `ring`, which the workspace already builds; it signs nothing.

use jsonwebtoken::crypto::{CryptoProvider, JwkUtils, JwtSigner, JwtVerifier};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};

/// An Ed25519 public key, raw (32 bytes), as the SDK decodes Restate's keys.
struct Ed25519Verifier(Vec<u8>);

impl signature::Verifier<Vec<u8>> for Ed25519Verifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> Result<(), signature::Error> {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &self.0)
            .verify(message, signature)
            .map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for Ed25519Verifier {
    fn algorithm(&self) -> Algorithm {
        Algorithm::EdDSA
    }
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    match algorithm {
        Algorithm::EdDSA => Ok(Box::new(Ed25519Verifier(key.as_bytes().to_vec()))),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

fn signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    // A worker only verifies; it never signs a token.
    Err(ErrorKind::InvalidAlgorithm.into())
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    jwk_utils: JwkUtils::new_unimplemented(),
};

/// Installs the provider for the process, unless the application installed one.
pub(crate) fn install_identity_verifier() {
    // An application's own provider, installed first, stays.
    let _ = PROVIDER.install_default();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use ring::signature::KeyPair;

    #[test]
    fn verifies_ed25519_and_refuses_a_forged_signature_or_another_algorithm() {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let key = DecodingKey::from_ed_der(pair.public_key().as_ref());
        let signed = pair.sign(b"message").as_ref().to_vec();
        let check = verifier(&Algorithm::EdDSA, &key).unwrap();
        assert!(signature::Verifier::verify(check.as_ref(), b"message", &signed).is_ok());
        assert!(signature::Verifier::verify(check.as_ref(), b"massage", &signed).is_err());
        assert!(verifier(&Algorithm::HS256, &key).is_err());
    }
}
