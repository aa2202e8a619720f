//! Property-test strategies shared by the provider crates' decoder tests (feature
//! `strategies`).

use proptest::prelude::*;

/// The inside of a JSON string literal, as a server writes it, built from pieces that stress a
/// decoder's string scan and its surrogate joiner: escaped quotes and backslashes, `\n`, lone
/// surrogate halves (`\ud83d`, `\ude00`), non-ASCII text, and the JSON text of arguments
/// (`{\"k\":`, `1}`).
pub fn json_string_literal() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("ab"),
            Just("\\\""),
            Just("\\\\"),
            Just("\\n"),
            Just("\\ud83d"),
            Just("\\ude00"),
            Just("é"),
            Just("{\\\"k\\\":"),
            Just("1}"),
        ],
        0..5,
    )
    .prop_map(|pieces| pieces.concat())
}
