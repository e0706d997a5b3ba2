//! Distribution (배포용) HWP documents: the body is in `ViewText/Section*`, each stream opened by
//! a DISTRIBUTE_DOC_DATA record of 256 bytes that hides the AES-128 key, followed by the
//! section's (usually compressed) records encrypted in ECB mode.
//!
//! The 256 bytes are masked with bytes from MSVC's `rand()` seeded by their first four bytes
//! (each random byte repeated a random 1–16 times); once unmasked, the key is the 16 bytes at
//! `4 + (seed & 0xF)`. This is the scheme hwplib, pyhwp and Apache Tika implement; the
//! protection is against editing and printing in Hangul, not against reading.

use aes::Aes128;
use aes::cipher::{BlockDecrypt, KeyInit};

use super::hwp_records::{DISTRIBUTE_DOC_DATA, damaged};
use crate::extract::ExtractError;

/// The key material's length.
const KEY_DATA_LEN: usize = 256;

/// MSVC's `srand`/`rand`: a 32-bit linear congruential generator giving 15-bit values.
struct MsvcRand(u32);

impl MsvcRand {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(214_013).wrapping_add(2_531_011);
        (self.0 >> 16) & 0x7fff
    }
}

/// The decrypted stream after its key record: the section's records, compressed if the
/// document is.
pub fn decrypt_view_text(stream: &[u8]) -> Result<Vec<u8>, ExtractError> {
    let (header, rest) = stream
        .split_first_chunk::<4>()
        .ok_or_else(|| damaged("a ViewText stream is empty"))?;
    let header = u32::from_le_bytes(*header);
    let (tag, size) = ((header & 0x3ff) as u16, (header >> 20) as usize);
    if tag != DISTRIBUTE_DOC_DATA || size != KEY_DATA_LEN {
        return Err(damaged(
            "a ViewText stream does not start with its key record",
        ));
    }
    let (masked, body) = rest
        .split_first_chunk::<KEY_DATA_LEN>()
        .ok_or_else(|| damaged("a ViewText key record is cut short"))?;
    let key = unmask_key(masked);
    let cipher = Aes128::new(&key.into());
    let mut plain = Vec::with_capacity(body.len());
    for chunk in body.chunks_exact(16) {
        let mut block = [0u8; 16];
        block.copy_from_slice(chunk);
        let mut block = block.into();
        cipher.decrypt_block(&mut block);
        plain.extend_from_slice(&block);
    }
    Ok(plain)
}

/// The AES key hidden in the 256 masked bytes.
fn unmask_key(masked: &[u8; KEY_DATA_LEN]) -> [u8; 16] {
    let mut data = *masked;
    let seed = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let mut rand = MsvcRand(seed);
    let (mut mask, mut run) = (0u8, 0u32);
    for (i, byte) in data.iter_mut().enumerate() {
        if run == 0 {
            mask = (rand.next() & 0xff) as u8;
            run = (rand.next() & 0xf) + 1;
        }
        // The seed itself is stored in the clear.
        if i >= 4 {
            *byte ^= mask;
        }
        run -= 1;
    }
    let start = 4 + usize::from(data[0] & 0xf);
    let mut key = [0u8; 16];
    key.copy_from_slice(&data[start..start + 16]);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msvc_rand_matches_its_known_first_values() {
        // MSVC: srand(1); rand() → 41, 18467, 6334.
        let mut rand = MsvcRand(1);
        assert_eq!([rand.next(), rand.next(), rand.next()], [41, 18467, 6334]);
    }

    #[test]
    fn a_stream_without_its_key_record_is_damaged() {
        assert!(matches!(
            decrypt_view_text(&[0x43, 0, 0, 0]),
            Err(ExtractError::Corrupt { .. })
        ));
        assert!(decrypt_view_text(&[]).is_err());
    }
}
