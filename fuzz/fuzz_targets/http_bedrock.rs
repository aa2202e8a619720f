#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| clawcall_fuzz::fuzz("http_bedrock", data));
