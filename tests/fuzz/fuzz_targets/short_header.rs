#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ovbench_fuzz::short_header(data));
