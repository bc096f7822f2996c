//! The plugin manifest reader (weft_plugin::fuzz): bytes anyone who can
//! write a plugin ConfigMap controls.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_plugin::fuzz::manifest(data));
