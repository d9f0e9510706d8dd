#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ovbench_fuzz::engine_intake(data));
