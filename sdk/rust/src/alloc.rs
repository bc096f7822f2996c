//! An allocator for components whose every instance serves one call.
//!
//! The Weft host never calls an instance twice (a spare answers
//! `properties`, then one real call, then its memory is reset), so a
//! general allocator's bookkeeping (free lists, coalescing, size classes)
//! is work nobody benefits from: nothing freed would be reused for long.
//! [`OneCallAllocator`] hands out memory by moving a pointer, frees only
//! the last block (and grows it in place), starts in the memory the module
//! is linked with (past its data: a call that fits there never grows the
//! memory, which on the host is an `mprotect` in the middle of the call),
//! and past that asks for memory a megabyte at a time. The instance's
//! memory limit still applies: an allocation past it fails as any would.
//!
//! Use it only where one call allocates a bounded amount (building one
//! resource, answering one request): a call that allocates and frees in a
//! long loop keeps every block until the instance is dropped.
//!
//! ```ignore
//! #[cfg(target_arch = "wasm32")]
//! #[global_allocator]
//! static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();
//! ```

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;

/// Wasm pages (64 KiB) asked for at least at once.
const GROW_PAGES: usize = 16;
const PAGE: usize = 64 << 10;

/// A bump allocator over the instance's linear memory (see the module).
pub struct OneCallAllocator {
    /// The next free byte and the end of the memory this allocator owns.
    next: Cell<usize>,
    end: Cell<usize>,
}

// A component instance runs on one thread: nothing shares the cells.
unsafe impl Sync for OneCallAllocator {}

impl OneCallAllocator {
    /// No memory yet: the first allocation grows the memory.
    pub const fn new() -> Self {
        OneCallAllocator {
            next: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// Memory for `layout` past `next`, growing the linear memory when
    /// the rest is too small.
    fn bump(&self, layout: Layout) -> *mut u8 {
        if self.end.get() == 0 {
            self.start();
        }
        let align = layout.align();
        let start = (self.next.get() + align - 1) & !(align - 1);
        match start.checked_add(layout.size()) {
            Some(end) if end <= self.end.get() => {
                self.next.set(end);
                start as *mut u8
            }
            _ => self.grow(layout),
        }
    }

    /// Takes the memory the module starts with past its data (from
    /// `__heap_base`, which the linker sets, to the end of the initial
    /// memory): a call that fits there never grows the memory, and a
    /// `memory.grow` costs an `mprotect` on the host, in the call.
    #[cfg(target_arch = "wasm32")]
    fn start(&self) {
        unsafe extern "C" {
            static __heap_base: u8;
        }
        let base = &raw const __heap_base as usize;
        let end = core::arch::wasm32::memory_size(0) * PAGE;
        self.next.set(base);
        self.end.set(end.max(base));
    }

    /// Natively nothing is there yet: the first allocation grows.
    #[cfg(not(target_arch = "wasm32"))]
    fn start(&self) {}

    /// Grows the memory by enough pages for `layout` (a chunk at least),
    /// then allocates it there.
    #[cfg(target_arch = "wasm32")]
    fn grow(&self, layout: Layout) -> *mut u8 {
        let need = layout.size() + layout.align();
        let pages = need.div_ceil(PAGE).max(GROW_PAGES);
        let previous = core::arch::wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return core::ptr::null_mut();
        }
        let base = previous * PAGE;
        if base != self.end.get() {
            // Not right after ours (the first grow): start afresh there.
            self.next.set(base);
        }
        self.end.set(base + pages * PAGE);
        self.bump(layout)
    }

    /// Natively (the SDK's own tests) the memory comes from the system
    /// allocator, a chunk at a time, never given back.
    #[cfg(not(target_arch = "wasm32"))]
    fn grow(&self, layout: Layout) -> *mut u8 {
        let size = (layout.size() + layout.align()).max(GROW_PAGES * PAGE);
        let Ok(chunk) = Layout::from_size_align(size, PAGE) else {
            return core::ptr::null_mut();
        };
        // SAFETY: a non-zero size.
        let base = unsafe { std::alloc::alloc(chunk) } as usize;
        if base == 0 {
            return core::ptr::null_mut();
        }
        self.next.set(base);
        self.end.set(base + size);
        self.bump(layout)
    }
}

impl Default for OneCallAllocator {
    fn default() -> Self {
        Self::new()
    }
}

unsafe impl GlobalAlloc for OneCallAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.bump(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Only the last block comes back (a temporary just made).
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let at = ptr as usize;
        // The last block grows or shrinks in place: a Vec or String being
        // built costs no copy.
        if at + layout.size() == self.next.get() && at + new_size <= self.end.get() {
            self.next.set(at + new_size);
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return core::ptr::null_mut();
        };
        let new = self.bump(new_layout);
        if !new.is_null() {
            // SAFETY: both blocks are live and distinct (bump never
            // overlaps a live block); the copy is the smaller size.
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[cfg(test)]
mod tests;
