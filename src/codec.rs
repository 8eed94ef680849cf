//! The one serialisation of checkpoint data (bincode 2, standard configuration): the
//! manifest, the components' own marks (stores, writers) and the run's configuration. A leaf
//! module, so that every layer can encode its mark without depending on `checkpoint`.

use serde::Serialize;

/// Serialises `v`.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, bincode::config::standard())
        .expect("serialising plain checkpoint data to a Vec cannot fail")
}

/// Reads back what [`encode`] wrote; the error says what is wrong (it does not decode, or
/// bytes are left over), for the caller to name the file or component.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match bincode::serde::decode_from_slice(bytes, bincode::config::standard()) {
        Ok((v, n)) if n == bytes.len() => Ok(v),
        Ok((_, n)) => Err(format!("{} bytes after its end", bytes.len() - n)),
        Err(e) => Err(format!("does not decode: {e}")),
    }
}
