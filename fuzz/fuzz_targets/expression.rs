//! CEL `when` conditions and `${...}` templates (weft_dag::fuzz).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_dag::fuzz::expression(data));
