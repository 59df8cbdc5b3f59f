//! Fixed-size bit sets over a machine's tools, and the word-level helpers the engine uses.

use core::fmt;
use core::hash::{Hash, Hasher};
use core::marker::PhantomData;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not, Sub};

/// Storage of a bit set: `[u64; N]`, one bit per tool (or per message condition).
///
/// Implemented for every `[u64; N]`; generated machines pick the `N` that fits.
pub trait Words:
    Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static + AsRef<[u64]> + AsMut<[u64]>
{
    /// All bits clear.
    const ZERO: Self;
}

impl<const N: usize> Words for [u64; N] {
    const ZERO: Self = [0; N];
}

/// Storage of a session's history ring: `[u16; H]`, one tool index per entry.
pub trait Entries:
    Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static + AsRef<[u16]> + AsMut<[u16]>
{
    /// Every entry zero (the ring's length says how many are live).
    const ZERO: Self;
}

impl<const N: usize> Entries for [u16; N] {
    const ZERO: Self = [0; N];
}

/// Is bit `i` set?
#[inline]
pub(crate) fn test(bits: &[u64], i: usize) -> bool {
    match bits.get(i / 64) {
        Some(w) => (w >> (i % 64)) & 1 == 1,
        None => false,
    }
}

/// Sets bit `i` (ignored when out of range).
#[inline]
pub(crate) fn set(bits: &mut [u64], i: usize) {
    if let Some(w) = bits.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

/// `out = a & b`, word by word.
#[inline]
pub(crate) fn and_into(out: &mut [u64], a: &[u64], b: &[u64]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x & y;
    }
}

/// Do `a` and `b` share a bit?
#[inline]
pub(crate) fn intersects(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

/// The lowest set bit, if any.
#[inline]
pub(crate) fn first(bits: &[u64]) -> Option<usize> {
    bits.iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
}

/// Iterates the indices of the set bits of `bits`, lowest first.
#[derive(Clone, Debug)]
pub struct BitIter<'a> {
    words: &'a [u64],
    base: usize,
    current: u64,
}

impl<'a> BitIter<'a> {
    /// Iterates the set bits of `words`.
    pub fn new(words: &'a [u64]) -> Self {
        match words.split_first() {
            Some((first, rest)) => BitIter {
                words: rest,
                base: 0,
                current: *first,
            },
            None => BitIter {
                words,
                base: 0,
                current: 0,
            },
        }
    }
}

impl Iterator for BitIter<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros() as usize;
                self.current &= self.current - 1;
                return Some(self.base + bit);
            }
            let (next, rest) = self.words.split_first()?;
            self.words = rest;
            self.base += 64;
            self.current = *next;
        }
    }
}

/// The tools of a machine: enumerated by a generated `enum Tool`.
///
/// Generated code implements this; users call the inherent methods of the generated
/// enum (`Tool::name`, `Tool::from_name`, `Tool::ALL`), which mirror these.
pub trait ToolEnum: Copy + Eq + Ord + Hash + fmt::Debug + Send + Sync + 'static {
    /// The bit-set storage for this machine's tools (`[u64; ceil(tools / 64)]`).
    #[doc(hidden)]
    type Words: Words;
    /// Every tool, in declaration order (`ALL[t.index()] == t`).
    const ALL: &'static [Self];
    /// The tool's position in [`ToolEnum::ALL`].
    fn index(self) -> usize;
    /// The tool's name as written in the template.
    fn name(self) -> &'static str;
    /// The tool with this exact name, if the machine has one.
    fn from_name(name: &str) -> Option<Self>;
}

/// A copyable set of a machine's tools: one bit per tool, no heap.
///
/// ```
/// # orch_runtime::__doc_machine!();
/// use demo::{Tool, ToolSet};
/// let set: ToolSet = [Tool::Search, Tool::Think].into_iter().collect();
/// assert!(set.contains(Tool::Search));
/// assert_eq!(set.len(), 2);
/// assert_eq!(set.names().collect::<Vec<_>>(), ["search", "think"]);
/// ```
pub struct ToolSet<T: ToolEnum> {
    words: T::Words,
    _tool: PhantomData<T>,
}

impl<T: ToolEnum> ToolSet<T> {
    /// The empty set.
    pub const EMPTY: Self = ToolSet {
        words: <T::Words as Words>::ZERO,
        _tool: PhantomData,
    };

    /// The empty set.
    pub const fn empty() -> Self {
        Self::EMPTY
    }

    /// Every tool of the machine.
    pub fn all() -> Self {
        let mut all = Self::EMPTY;
        for i in 0..T::ALL.len() {
            set(all.words.as_mut(), i);
        }
        all
    }

    #[doc(hidden)]
    /// A set from raw words (bit `i` is `T::ALL[i]`); bits past the last tool are cleared.
    pub fn from_words(words: T::Words) -> Self {
        let mut set: ToolSet<T> = ToolSet {
            words,
            _tool: PhantomData,
        };
        let n = T::ALL.len();
        let slice: &mut [u64] = set.words.as_mut();
        for (i, w) in slice.iter_mut().enumerate() {
            let lo = i * 64;
            if lo >= n {
                *w = 0;
            } else if n - lo < 64 {
                *w &= (1u64 << (n - lo)) - 1;
            }
        }
        set
    }

    /// A set from raw words that have no bit past the last tool (the engine's own
    /// sets, and intersections with one): no masking.
    #[inline(always)]
    pub(crate) fn from_valid_words(words: T::Words) -> Self {
        debug_assert!(
            Self::from_words(words).words.as_ref() == words.as_ref(),
            "a set with a bit past the last tool"
        );
        ToolSet {
            words,
            _tool: PhantomData,
        }
    }

    #[doc(hidden)]
    /// The raw words (bit `i` is `T::ALL[i]`).
    pub fn words(&self) -> &T::Words {
        &self.words
    }

    /// Is `tool` in the set?
    #[inline]
    pub fn contains(&self, tool: T) -> bool {
        test(self.words.as_ref(), tool.index())
    }

    /// Adds `tool`.
    #[inline]
    pub fn insert(&mut self, tool: T) {
        set(self.words.as_mut(), tool.index());
    }

    /// Removes `tool`.
    #[inline]
    pub fn remove(&mut self, tool: T) {
        let i = tool.index();
        if let Some(w) = self.words.as_mut().get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// The set with `tool` added.
    #[must_use]
    pub fn with(mut self, tool: T) -> Self {
        self.insert(tool);
        self
    }

    /// How many tools the set holds.
    pub fn len(&self) -> usize {
        self.words
            .as_ref()
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum()
    }

    /// Is the set empty?
    pub fn is_empty(&self) -> bool {
        self.words.as_ref().iter().all(|w| *w == 0)
    }

    /// The first tool in declaration order, if any.
    pub fn first(&self) -> Option<T> {
        first(self.words.as_ref()).and_then(|i| T::ALL.get(i).copied())
    }

    /// The tools, in declaration order.
    pub fn iter(&self) -> ToolIter<'_, T> {
        ToolIter {
            bits: BitIter::new(self.words.as_ref()),
            _tool: PhantomData,
        }
    }

    /// The tools' names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.iter().map(T::name)
    }
}

/// Iterator over the tools of a [`ToolSet`].
#[derive(Clone, Debug)]
pub struct ToolIter<'a, T> {
    bits: BitIter<'a>,
    _tool: PhantomData<T>,
}

impl<T: ToolEnum> Iterator for ToolIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.bits.next().and_then(|i| T::ALL.get(i).copied())
    }
}

impl<'a, T: ToolEnum> IntoIterator for &'a ToolSet<T> {
    type Item = T;
    type IntoIter = ToolIter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: ToolEnum> FromIterator<T> for ToolSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut set = Self::EMPTY;
        for t in iter {
            set.insert(t);
        }
        set
    }
}

impl<T: ToolEnum> Extend<T> for ToolSet<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for t in iter {
            self.insert(t);
        }
    }
}

impl<T: ToolEnum> From<T> for ToolSet<T> {
    fn from(tool: T) -> Self {
        Self::EMPTY.with(tool)
    }
}

impl<T: ToolEnum> Clone for ToolSet<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ToolEnum> Copy for ToolSet<T> {}

impl<T: ToolEnum> PartialEq for ToolSet<T> {
    fn eq(&self, other: &Self) -> bool {
        self.words == other.words
    }
}
impl<T: ToolEnum> Eq for ToolSet<T> {}

impl<T: ToolEnum> Hash for ToolSet<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.words.hash(state);
    }
}

impl<T: ToolEnum> Default for ToolSet<T> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<T: ToolEnum> fmt::Debug for ToolSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

impl<T: ToolEnum> fmt::Display for ToolSet<T> {
    /// `{search, think}`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        f.write_str("}")
    }
}

macro_rules! binop {
    ($trait:ident, $method:ident, $assign:ident, $assign_method:ident, $op:tt) => {
        impl<T: ToolEnum> $assign for ToolSet<T> {
            fn $assign_method(&mut self, rhs: Self) {
                for (a, b) in self.words.as_mut().iter_mut().zip(rhs.words.as_ref()) {
                    *a $op *b;
                }
            }
        }
        impl<T: ToolEnum> $trait for ToolSet<T> {
            type Output = Self;
            fn $method(mut self, rhs: Self) -> Self {
                <Self as $assign>::$assign_method(&mut self, rhs);
                self
            }
        }
    };
}
binop!(BitAnd, bitand, BitAndAssign, bitand_assign, &=);
binop!(BitOr, bitor, BitOrAssign, bitor_assign, |=);

impl<T: ToolEnum> Sub for ToolSet<T> {
    type Output = Self;
    /// The tools of `self` that are not in `rhs`.
    fn sub(mut self, rhs: Self) -> Self {
        for (a, b) in self.words.as_mut().iter_mut().zip(rhs.words.as_ref()) {
            *a &= !*b;
        }
        self
    }
}

impl<T: ToolEnum> Not for ToolSet<T> {
    type Output = Self;
    /// Every tool of the machine that is not in the set.
    fn not(self) -> Self {
        Self::all() - self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_iter_walks_every_word() {
        let words = [0b101u64, 0, 1 << 63, 1];
        let got: Vec<usize> = BitIter::new(&words).collect();
        assert_eq!(got, vec![0, 2, 191, 192]);
        assert_eq!(BitIter::new(&[]).count(), 0);
    }

    #[test]
    fn helpers() {
        let mut w = [0u64; 2];
        set(&mut w, 70);
        set(&mut w, 500); // out of range: ignored
        assert!(test(&w, 70));
        assert!(!test(&w, 69));
        assert!(!test(&w, 500));
        assert_eq!(first(&w), Some(70));
        assert!(intersects(&w, &[0, 1 << 6]));
        let mut out = [0u64; 2];
        and_into(&mut out, &w, &[u64::MAX, 0]);
        assert_eq!(out, [0, 0]);
    }
}
