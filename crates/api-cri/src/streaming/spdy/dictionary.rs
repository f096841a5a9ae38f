//! The SPDY/3 header-compression dictionary (draft 3, section 2.6.10.1):
//! a protocol constant both ends preset their zlib streams with, kept as
//! the bytes the draft lists (1,423 of them, Adler-32 0xE3C6A7C2).

pub(crate) const DICTIONARY: [u8; 1423] = *include_bytes!("dictionary.bin");

#[cfg(test)]
mod tests {
    use super::*;

    /// zlib's checksum of a preset dictionary, which a peer's stream names.
    fn adler32(bytes: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in bytes {
            a = (a + u32::from(byte)) % 65521;
            b = (b + a) % 65521;
        }
        b << 16 | a
    }

    #[test]
    fn the_dictionary_is_the_one_peers_name() {
        assert_eq!(adler32(&DICTIONARY), 0xE3C6_A7C2);
        assert!(DICTIONARY.starts_with(b"\x00\x00\x00\x07options"));
    }
}
