//! Integration tests for llm-{{name}} (its fixtures run in `tests/conformance.rs`).

use llm_core::Provider;

#[test]
fn serves_its_api_id() {
    assert_eq!(llm_{{snake}}::{{Camel}}Provider::new().api(), llm_{{snake}}::API);
    assert_eq!(llm_{{snake}}::INFO.api, llm_{{snake}}::API);
}

/// A server that builds its stream from UTF-16 strings may split a surrogate pair across
/// two events: the decoder joins it into one character instead of failing either event.
#[test]
fn a_surrogate_pair_split_across_events_is_one_character() {
    use llm_core::raw::drive::WireDecoder;
    let mut decoder = llm_{{snake}}::Decoder::new();
    let mut out = Vec::new();
    for data in [r#"{"type":"text","text":"a\ud83d"}"#, r#"{"type":"text","text":"\ude00b"}"#] {
        let event = llm_core::raw::sse::SseEvent { event: None, data: data.to_owned(), id: None };
        decoder.event(event, &mut out);
    }
    let text: String = out
        .iter()
        .map(|d| match d {
            llm_core::raw::Delta::Text { text, .. } => text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(text, "a\u{1F600}b");
}

/// One live round trip; runs only when `{{UPPER}}_API_KEY` is set and `INFO` lists a model.
#[tokio::test]
async fn live_smoke() {
    let Some(key) = llm_http::Env::Process.api_key(&llm_{{snake}}::INFO) else {
        println!("skipped: {{UPPER}}_API_KEY not set");
        return;
    };
    let Some(model) = llm_{{snake}}::INFO.default_model() else {
        println!("skipped: INFO lists no model yet");
        return;
    };
    let options = llm_core::StreamOptions {
        api_key: Some(llm_core::ApiKey::new(key)),
        ..llm_core::StreamOptions::default()
    };
    let context = llm_core::Context {
        messages: vec![llm_core::Message::user("Say hi.")],
        ..llm_core::Context::default()
    };
    let message = llm_{{snake}}::{{Camel}}Provider::new().complete(&model, &context, &options).await;
    assert!(message.error_message.is_none(), "{:?}", message.error_message);
}
