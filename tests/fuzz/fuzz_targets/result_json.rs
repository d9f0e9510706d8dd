#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ovbench_fuzz::result_json(data));
