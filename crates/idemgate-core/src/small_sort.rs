//! A heap sort, for the few lists the worker sorts (an object's member
//! names, a form's parameters, a coordinator's waiters).
//!
//! Why not the standard library's: the wasm holds one copy of a sort per
//! element type and order, and each copy of `sort_by` or
//! `sort_unstable_by` is 2.6-3.5 KB of code (a driftsort or ipnsort with
//! its small-sort networks); this one is about 0.3 KB, with the same
//! O(n log n) bound (short lists by insertion). It is not stable, which none of them needs: their
//! elements that compare equal are identical (a form's repeated pair) or
//! there are none (member names and waiters are unique).

/// Sorts `items` so that no element is `less` than the one before it.
pub fn sort_by<T>(items: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let count = items.len();
    // Most lists are short (an object's few members): insertion sort
    // compares least there.
    if count <= 16 {
        for end in 1..count {
            let mut at = end;
            while at > 0 && less(&items[at], &items[at - 1]) {
                items.swap(at, at - 1);
                at -= 1;
            }
        }
        return;
    }
    // Moves the element at `root` down the heap of the first `end` ones.
    let sift_down = |items: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(&items[child], &items[child + 1]) {
            child += 1;
        }
        if !less(&items[root], &items[child]) {
            return;
        }
        items.swap(root, child);
        root = child;
    };
    for root in (0..count / 2).rev() {
        sift_down(items, root, count);
    }
    for end in (1..count).rev() {
        items.swap(0, end);
        sift_down(items, 0, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_the_standard_library_does() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        for length in [0, 1, 2, 3, 4, 5, 7, 16, 17, 100, 1_000] {
            let mut items: Vec<u64> = (0..length)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % 50
                })
                .collect();
            let mut expected = items.clone();
            expected.sort();
            sort_by(&mut items, |a, b| a < b);
            assert_eq!(items, expected, "{length}");
        }
    }

    #[test]
    fn a_sorted_or_reversed_list_stays_in_bound() {
        for mut items in [
            (0..200_000).collect::<Vec<u32>>(),
            (0..200_000).rev().collect(),
        ] {
            let expected: Vec<u32> = (0..200_000).collect();
            crate::within(20, move || {
                sort_by(&mut items, |a, b| a < b);
                assert_eq!(items, expected);
            });
        }
    }
}
