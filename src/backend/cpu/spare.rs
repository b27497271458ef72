//! Spare f32 buffers for the ops' results and the products' largest
//! temporaries. A prompt's ops each make megabytes (a 64-token batch of
//! the 1B shape's 5632-wide feed-forward: 1.4 MB a tensor); allocated and
//! freed op after op, glibc gave such buffers back to the OS and took them
//! again as fresh pages, faulted in and zeroed by the kernel: 8-14% of that
//! shape's pp64 on a 2-core EPYC. Kept here, they are reused warm.

use std::sync::Mutex;

/// Buffers smaller than this are left to the allocator, which keeps them.
const MIN_VALUES: usize = 16 << 10;
/// Larger ones are not kept (a whole prompt's logits), so that what is
/// kept stays bounded: at most [`KEEP`] x this many values.
const MAX_VALUES: usize = 8 << 20;
/// Most buffers kept; the smallest go first.
const KEEP: usize = 8;

#[derive(Default)]
pub struct Spare {
    kept: Mutex<Vec<Vec<f32>>>,
}

impl Spare {
    /// `len` values for the caller to overwrite every one of: a kept buffer
    /// where one is large enough (its old values left in it), else zeros.
    pub fn overwritable(&self, len: usize) -> Vec<f32> {
        let taken = self.kept.lock().ok().and_then(|mut kept| {
            let (i, _) = kept
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= len)
                .min_by_key(|(_, v)| v.capacity())?;
            Some(kept.swap_remove(i))
        });
        match taken {
            Some(mut v) => {
                // Only values past the old length are written here.
                v.resize(len, 0.0);
                v
            }
            None => vec![0.0; len],
        }
    }

    /// Keeps `v` for a later [`Spare::overwritable`].
    pub fn give(&self, v: Vec<f32>) {
        if !(MIN_VALUES..=MAX_VALUES).contains(&v.capacity()) {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        kept.push(v);
        if kept.len() > KEEP {
            if let Some((i, _)) = kept.iter().enumerate().min_by_key(|(_, v)| v.capacity()) {
                kept.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_is_reused_at_any_length_it_holds() {
        let spare = Spare::default();
        let big = vec![1.0f32; 1 << 16];
        let at = big.as_ptr();
        spare.give(big);
        let v = spare.overwritable(1000);
        assert_eq!((v.len(), v.as_ptr()), (1000, at));
        spare.give(v);
        // Longer than before: the tail past the old length is zeros.
        let v = spare.overwritable(2000);
        assert_eq!((v.len(), v.as_ptr()), (2000, at));
        assert!(v[1000..].iter().all(|&x| x == 0.0));
        // Nothing kept fits: a new buffer of zeros.
        let w = spare.overwritable(1 << 17);
        assert!(w.iter().all(|&x| x == 0.0));
        // Small buffers are not kept.
        spare.give(vec![0.0; 16]);
        assert_eq!(spare.kept.lock().map(|k| k.len()).unwrap_or(9), 0);
    }

    #[test]
    fn the_smallest_go_first() {
        let spare = Spare::default();
        for i in 0..=KEEP {
            spare.give(vec![0.0; MIN_VALUES + i]);
        }
        let kept = spare.kept.lock().map(|k| k.len()).unwrap_or(0);
        assert_eq!(kept, KEEP);
        let v = spare.overwritable(1);
        assert!(v.capacity() > MIN_VALUES);
    }
}
