//! The Workflow spec reader, validator and DAG compiler (weft_dag::fuzz).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_dag::fuzz::workflow_spec(data));
