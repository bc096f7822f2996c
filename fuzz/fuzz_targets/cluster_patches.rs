//! The dev cluster's patch handlers (weft_cluster::fuzz): JSON patch, merge
//! patch, strategic merge patch and server-side apply field sets.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_cluster::fuzz::patches(data));
