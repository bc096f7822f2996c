use super::*;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn blocks_are_aligned_apart_and_the_last_one_comes_back() {
    let a = OneCallAllocator::new();
    unsafe {
        let x = a.alloc(layout(3, 1));
        let y = a.alloc(layout(16, 8));
        assert_eq!(y as usize % 8, 0);
        assert!(y as usize >= x as usize + 3);
        // The last block is reclaimed; an earlier one is not.
        a.dealloc(y, layout(16, 8));
        assert_eq!(a.alloc(layout(16, 8)), y);
        a.dealloc(x, layout(3, 1));
        assert!(a.alloc(layout(1, 1)) as usize > x as usize);
    }
}

#[test]
fn the_last_block_grows_in_place_and_others_move_with_their_bytes() {
    let a = OneCallAllocator::new();
    unsafe {
        let x = a.alloc(layout(4, 1));
        x.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
        assert_eq!(a.realloc(x, layout(4, 1), 100), x, "in place");
        let y = a.alloc(layout(8, 8));
        let moved = a.realloc(x, layout(100, 1), 200);
        assert_ne!(moved, x);
        assert!(moved as usize >= y as usize + 8, "past y");
        assert_eq!(core::slice::from_raw_parts(moved, 4), b"abcd");
    }
}

#[test]
fn a_block_larger_than_a_chunk_gets_memory_of_its_own() {
    let a = OneCallAllocator::new();
    unsafe {
        let small = a.alloc(layout(8, 8));
        let big = a.alloc(layout(3 * GROW_PAGES * PAGE, 16));
        assert!(!big.is_null());
        assert_eq!(big as usize % 16, 0);
        big.write_bytes(7, 3 * GROW_PAGES * PAGE);
        assert_ne!(big, small);
    }
}
