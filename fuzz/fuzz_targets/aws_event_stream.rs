#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| clawcall_fuzz::fuzz("aws_event_stream", data));
