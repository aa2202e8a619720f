#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use llm_core::{ApiKey, Context, ErrorKind, Message, Model, StreamOptions};

use super::build_request;

fn context() -> Context {
    Context { messages: vec![Message::user("hi")], ..Context::default() }
}

#[test]
fn the_key_is_sent_as_a_header_and_never_printed() {
    let options = StreamOptions {
        api_key: Some(ApiKey::new("secret-value-123")),
        ..StreamOptions::default()
    };
    let request = build_request(&Model::default(), &context(), &options).unwrap();
    assert!(!request.url.contains("secret-value-123"));
    assert_eq!(request.headers.get("authorization").unwrap(), "Bearer secret-value-123");
    assert!(!format!("{request:?}").contains("secret-value-123"));
}

#[test]
fn no_key_is_an_auth_error_before_anything_is_sent() {
    let error =
        build_request(&Model::default(), &context(), &StreamOptions::default()).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Auth);
    assert!(!error.retryable);
}

#[test]
fn the_body_is_the_same_bytes_for_the_same_input() {
    let options = StreamOptions { api_key: Some(ApiKey::new("k")), ..StreamOptions::default() };
    let a = build_request(&Model::default(), &context(), &options).unwrap();
    let b = build_request(&Model::default(), &context(), &options).unwrap();
    assert_eq!(a.body, b.body);
}
