//! Weight arrays that are either owned or a view into a read-only file
//! mapping: the embedding tables of `model.safetensors` and the prepared
//! dense layers of the weight cache (`weight_cache`) are used where they lie
//! in the page cache, so a process that embeds one question reads only the
//! pages it touches instead of reading and converting the whole model.

use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

/// Element types that may be viewed in mapped bytes.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid value and
/// the type must have no padding.
pub(crate) unsafe trait Plain: Copy + Send + Sync + 'static {}

// SAFETY: plain numbers: every bit pattern is a value, no padding.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for i8 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}

/// An array of `T`, owned or mapped.
pub(crate) struct Buf<T: Plain> {
    inner: Inner<T>,
}

enum Inner<T> {
    Owned(Vec<T>),
    /// `len` elements at byte `offset` of `map` (checked aligned and in range).
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
    },
}

impl<T: Plain> Buf<T> {
    /// A view of `len` elements at byte `offset` of `map`, or `None` when
    /// they are misaligned for `T`, out of range, or the target is
    /// big-endian (the files hold little-endian numbers).
    pub(crate) fn mapped(map: &Arc<Mmap>, offset: usize, len: usize) -> Option<Buf<T>> {
        let bytes = len.checked_mul(size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        let aligned = (map.as_ptr() as usize).wrapping_add(offset).is_multiple_of(align_of::<T>());
        if cfg!(target_endian = "big") || end > map.len() || !aligned {
            return None;
        }
        Some(Buf { inner: Inner::Mapped { map: Arc::clone(map), offset, len } })
    }

    /// True when the elements are read from a file mapping.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.inner, Inner::Mapped { .. })
    }

    /// The elements' bytes (little-endian on the targets the cache serves).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        let s: &[T] = self;
        // SAFETY: `Plain` types have no padding, so every byte is initialised.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), size_of_val(s)) }
    }
}

impl<T: Plain> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Buf<T> {
        Buf { inner: Inner::Owned(v) }
    }
}

impl<T: Plain> Deref for Buf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.inner {
            Inner::Owned(v) => v,
            // SAFETY: `mapped` checked the range and the alignment; `Plain`
            // makes any bytes a valid `T`; the mapping lives as long as self.
            Inner::Mapped { map, offset, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().add(*offset).cast::<T>(), *len)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(bytes: &[u8]) -> Arc<Mmap> {
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, bytes).unwrap();
        // SAFETY: a private temporary file nobody else writes.
        Arc::new(unsafe { Mmap::map(&f) }.unwrap())
    }

    #[test]
    fn views_mapped_numbers() {
        let values = [1.5f32, -2.0, 3.25];
        let mut bytes = vec![0u8; 4];
        bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        let map = map_of(&bytes);
        let b = Buf::<f32>::mapped(&map, 4, 3).unwrap();
        assert!(b.is_mapped());
        assert_eq!(&b[..], &values);
        assert_eq!(b.as_bytes(), &bytes[4..]);
        // Misaligned, or past the end: refused.
        assert!(Buf::<f32>::mapped(&map, 2, 3).is_none());
        assert!(Buf::<f32>::mapped(&map, 4, 4).is_none());
        assert!(Buf::<f32>::mapped(&map, 4, usize::MAX).is_none());
        let owned = Buf::from(values.to_vec());
        assert!(!owned.is_mapped());
        assert_eq!(owned.as_bytes(), b.as_bytes());
    }
}
