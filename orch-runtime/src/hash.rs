//! A fast, non-keyed hash for tables keyed by orch's own data — the compiler checks'
//! search states, the npm package's interned allowed sets — where the protection
//! SipHash buys against chosen keys is not needed (SipHash was ~17 % of compiling a
//! template with message conditions). The mixing step is the one rustc's `FxHasher`
//! uses.

use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FxHasher`] (make one with `HashMap::default()`).
pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Folds each word into the state by rotate, xor and multiply.
#[derive(Default, Clone, Copy, Debug)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length tells `[1]` from `[1, 0]`.
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::HashMap;

    #[test]
    fn tells_keys_apart() {
        let mut map: HashMap<Vec<u64>, usize> = HashMap::default();
        let keys: Vec<Vec<u64>> = (0..2_000u64)
            .map(|i| vec![i % 7, i / 7, i.wrapping_mul(0x9e37_79b9)])
            .chain([vec![], vec![0], vec![0, 0]])
            .collect();
        for (i, k) in keys.iter().enumerate() {
            map.insert(k.clone(), i);
        }
        assert_eq!(map.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k), Some(&i));
        }
        let mut strings: HashMap<String, ()> = HashMap::default();
        for s in ["", "a", "a\0", "ab", "abcdefgh", "abcdefgh\0"] {
            assert!(strings.insert(s.to_owned(), ()).is_none(), "{s:?}");
        }
    }
}
