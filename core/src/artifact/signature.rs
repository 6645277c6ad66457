//! Ed25519 signatures over artifacts, so that a runtime given its owner's public key runs only the
//! artifacts the owner signed.
//!
//! A signed artifact is an unsigned one whose integrity record (the last record, ending the file) is
//! followed, inside that record, by a 64-byte Ed25519 signature of every byte of the file before the
//! signature — the record's own length field and the integrity table included. Ed25519 (RFC 8032, via
//! `ed25519-dalek`) hashes what it signs with SHA-512, so unlike the xxh3 integrity record it holds
//! against someone who rewrites the file on purpose. Without a trusted key the signature is not read.
//!
//! Keys are files of 64 hex digits and a newline: the 32-byte secret seed, or the 32-byte public key.

use std::ops::Range;

use ed25519_dalek::{Signature, Signer};
pub use ed25519_dalek::{SigningKey, VerifyingKey};

use super::container;
use super::integrity;

/// Bytes of a signature.
pub const SIGNATURE_LEN: usize = 64;

/// Why an artifact could not be signed or is not signed by the trusted key. Display is one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the artifact is not signed, and a trusted key is set")]
    Unsigned,
    #[error("the artifact's signature does not match the trusted key")]
    Mismatch,
    #[error("already signed")]
    AlreadySigned,
    #[error("not an artifact with an integrity record: {0}")]
    NotAnArtifact(String),
    #[error("{0}")]
    Key(String),
}

/// Where the integrity record lies, and whether it carries a signature.
fn integrity_record(bytes: &[u8]) -> Result<(Range<usize>, bool), SignatureError> {
    let c = container::parse(bytes).map_err(|e| SignatureError::NotAnArtifact(e.to_string()))?;
    integrity::check(bytes, c.pickle.clone(), &c.records).map_err(|e| SignatureError::NotAnArtifact(e.to_string()))?;
    let last = c.records.last().expect("checked: an integrity record is present").clone();
    let table = integrity::table_len(c.records.len() - 1);
    Ok((last.clone(), last.len() == table + SIGNATURE_LEN))
}

/// Signs the (unsigned, intact) artifact `bytes`: returns the signed file's bytes.
pub fn sign(bytes: &[u8], key: &SigningKey) -> Result<Vec<u8>, SignatureError> {
    let (record, signed) = integrity_record(bytes)?;
    if signed {
        return Err(SignatureError::AlreadySigned);
    }
    // The integrity record ends the file: it grows by the signature, and its length field says so.
    let mut out = Vec::with_capacity(bytes.len() + SIGNATURE_LEN);
    out.extend_from_slice(bytes);
    let len_field = record.start - 8..record.start;
    out[len_field].copy_from_slice(&((record.len() + SIGNATURE_LEN) as i64).to_le_bytes());
    let signature = key.sign(&out);
    out.extend_from_slice(&signature.to_bytes());
    Ok(out)
}

/// Checks that the artifact `bytes` carries a signature of the holder of `key`.
pub fn verify(bytes: &[u8], key: &VerifyingKey) -> Result<(), SignatureError> {
    let (_, signed) = integrity_record(bytes)?;
    if !signed {
        return Err(SignatureError::Unsigned);
    }
    let (message, signature) = bytes.split_at(bytes.len() - SIGNATURE_LEN);
    let signature = Signature::from_bytes(signature.try_into().expect("split at 64 bytes"));
    key.verify_strict(message, &signature).map_err(|_| SignatureError::Mismatch)
}

/// A key file's contents: 64 hex digits, surrounding whitespace ignored.
fn key_bytes(text: &str, what: &str) -> Result<[u8; 32], SignatureError> {
    let hex = text.trim();
    let bad = || SignatureError::Key(format!("a {what} key file holds 64 hex digits"));
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn to_hex(bytes: &[u8; 32]) -> String {
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.push('\n');
    s
}

/// Reads a secret key file.
pub fn secret_key(text: &str) -> Result<SigningKey, SignatureError> {
    Ok(SigningKey::from_bytes(&key_bytes(text, "secret")?))
}

/// Reads a public (trusted) key file.
pub fn public_key(text: &str) -> Result<VerifyingKey, SignatureError> {
    VerifyingKey::from_bytes(&key_bytes(text, "public")?)
        .map_err(|_| SignatureError::Key("the public key is not a valid Ed25519 point".to_string()))
}

/// A key pair from a 32-byte random seed: the secret and public key files' contents.
pub fn key_pair(seed: [u8; 32]) -> (String, String) {
    let key = SigningKey::from_bytes(&seed);
    (to_hex(&key.to_bytes()), to_hex(&key.verifying_key().to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::container::{self as c, Record};

    fn artifact() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        let data = b"weights".to_vec();
        c::write(&path, b"pickle", &[Record::Pad, Record::Data(&data), Record::Integrity]).unwrap();
        std::fs::read(path).unwrap()
    }

    #[test]
    fn signed_artifacts_verify_with_their_key_only() {
        let (secret, public) = key_pair([7; 32]);
        let (key, trusted) = (secret_key(&secret).unwrap(), public_key(&public).unwrap());
        let unsigned = artifact();
        assert_eq!(verify(&unsigned, &trusted), Err(SignatureError::Unsigned));
        let signed = sign(&unsigned, &key).unwrap();
        assert_eq!(signed.len(), unsigned.len() + SIGNATURE_LEN);
        verify(&signed, &trusted).unwrap();
        assert_eq!(sign(&signed, &key), Err(SignatureError::AlreadySigned));
        // Still a valid container whose integrity holds: readers without a key load it as before.
        let parsed = c::parse(&signed).unwrap();
        integrity::check(&signed, parsed.pickle, &parsed.records).unwrap();

        let other = public_key(&key_pair([8; 32]).1).unwrap();
        assert_eq!(verify(&signed, &other), Err(SignatureError::Mismatch));
        // Any changed byte of the signed part or of the signature is refused.
        for at in [0, 9, signed.len() / 2, signed.len() - SIGNATURE_LEN - 1, signed.len() - 1] {
            let mut bad = signed.clone();
            bad[at] ^= 1;
            assert!(verify(&bad, &trusted).is_err(), "byte {at}");
        }
    }

    #[test]
    fn key_files_are_64_hex_digits() {
        let (secret, public) = key_pair([1; 32]);
        assert_eq!(secret.len(), 65);
        assert!(secret_key(&format!("  {secret}  ")).is_ok());
        assert!(public_key(&public).is_ok());
        for bad in ["", "00", &"zz".repeat(32), &"é".repeat(32)] {
            let err = public_key(bad).unwrap_err().to_string();
            assert_eq!(err, "a public key file holds 64 hex digits", "{bad}");
        }
    }
}
