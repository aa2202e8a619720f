//! `raw::first_element`: the element a chunk reads of an array, against `Vec`'s reading.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize, PartialEq)]
struct Choice {
    index: u64,
    text: String,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default, deserialize_with = "index_zero")]
    choices: Option<Choice>,
}

fn index_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Choice>, D::Error> {
    llm_core::raw::first_element(d, |c: &Choice| c.index == 0)
}

fn read(value: serde_json::Value) -> Result<Option<Choice>, serde_json::Error> {
    serde_json::from_str::<Chunk>(&value.to_string()).map(|c| c.choices)
}

#[test]
fn the_first_accepted_element_of_an_array_or_null() {
    let choice = |index, text: &str| Choice { index, text: text.to_owned() };
    assert_eq!(read(json!({})).unwrap(), None);
    assert_eq!(read(json!({"choices": null})).unwrap(), None);
    assert_eq!(read(json!({"choices": []})).unwrap(), None);
    let both = json!({"choices": [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}, {"index": 0, "text": "c"}]});
    assert_eq!(read(both).unwrap(), Some(choice(0, "a")));
    assert_eq!(read(json!({"choices": [{"index": 2, "text": "x"}]})).unwrap(), None);
}

#[test]
fn an_element_of_another_shape_fails_as_a_vectors_read_does() {
    for bad in [
        json!({"choices": [{"index": 0, "text": "a"}, 7]}),
        json!({"choices": [{"index": "0", "text": "a"}]}),
        json!({"choices": {"index": 0, "text": "a"}}),
        json!({"choices": "a"}),
    ] {
        let as_vec = serde_json::from_value::<Vec<Choice>>(bad["choices"].clone());
        assert!(as_vec.is_err(), "{bad}");
        assert!(read(bad.clone()).is_err(), "{bad}");
    }
}
