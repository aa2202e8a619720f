use std::time::Duration;

use super::*;

fn parse(body: &str) -> ErrorBody {
    ErrorBody::parse(body)
}

#[test]
fn every_known_envelope_gives_its_message_code_and_type() {
    let openai = parse(
        r#"{"error":{"message":"Bad key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    );
    assert_eq!(openai.message.as_deref(), Some("Bad key"));
    assert_eq!(openai.code.as_deref(), Some("invalid_api_key"));
    assert_eq!(openai.error_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(openai.label(), Some("invalid_api_key"));

    let anthropic = parse(
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
    );
    assert_eq!(anthropic.error_type.as_deref(), Some("overloaded_error"));
    assert_eq!(anthropic.message.as_deref(), Some("Overloaded"));

    let vllm =
        parse(r#"{"object":"error","message":"too long","type":"BadRequestError","code":400}"#);
    assert_eq!(vllm.message.as_deref(), Some("too long"));
    assert_eq!((vllm.code.as_deref(), vllm.numeric_code), (Some("400"), Some(400)));

    let bare = parse(r#"{"error":"plain words"}"#);
    assert_eq!(bare.message.as_deref(), Some("plain words"));

    let detail = parse(r#"{"detail":"Unauthorized"}"#);
    assert_eq!(detail.message.as_deref(), Some("Unauthorized"));

    let fastapi = parse(
        r#"{"detail":[{"loc":["body","messages",0],"msg":"field required"},{"msg":"bad"}],"type":"invalid_request_error","code":3001}"#,
    );
    assert_eq!(fastapi.message.as_deref(), Some("body.messages.0: field required; bad"));
    assert_eq!(fastapi.code.as_deref(), Some("3001"));
    assert_eq!(fastapi.numeric_code, None, "3001 is no HTTP status");

    let google = parse(
        r#"[{"error":{"code":429,"message":"Quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}]"#,
    );
    assert_eq!(google.status.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(google.numeric_code, Some(429));
    assert_eq!(google.reason.as_deref(), Some("RATE_LIMIT_EXCEEDED"));
    assert_eq!(google.retry_delay, Some(Duration::from_millis(1500)));

    let aws = parse(r#"{"__type":"com.amazon#ThrottlingException","Message":"slow down"}"#);
    assert_eq!(aws.error_type.as_deref(), Some("com.amazon#ThrottlingException"));
    assert_eq!(aws.message.as_deref(), Some("slow down"));

    let openrouter = parse(
        r#"{"error":{"message":"Provider returned error","code":502,"metadata":{"raw":"upstream down"}}}"#,
    );
    assert_eq!(openrouter.message.as_deref(), Some("Provider returned error\nupstream down"));

    // The inner object wins; what it lacks comes from the outer one.
    let split = parse(r#"{"error":{"code":"1300"},"message":"outer words","type":"rate_limited"}"#);
    assert_eq!(split.message.as_deref(), Some("outer words"));
    assert_eq!(
        (split.code.as_deref(), split.error_type.as_deref()),
        (Some("1300"), Some("rate_limited"))
    );
}

#[test]
fn a_message_of_any_json_shape_becomes_text() {
    let message = |body: &str| parse(body).message;
    assert_eq!(message(r#"{"error":{"message":{"message":"nested"}}}"#).as_deref(), Some("nested"));
    assert_eq!(message(r#"{"error":{"message":[{"message":"a"},"b"]}}"#).as_deref(), Some("a; b"));
    assert_eq!(message(r#"{"message":{"x":[1]}}"#).as_deref(), Some(r#"{"x":[1]}"#));
    assert_eq!(message(r#"{"message":42}"#).as_deref(), Some("42"));
    assert_eq!(message(r#"{"message":null,"detail":"d"}"#).as_deref(), Some("d"));
    assert_eq!(message(r#"{"message":""}"#), None);
    assert_eq!(message(r#"{"message":[]}"#), None);
    assert_eq!(message(r#""just a string""#).as_deref(), Some("just a string"));
    assert_eq!(message("[]"), None);
    assert_eq!(message("null"), None);
    // `type: "error"` is the envelope's own marker, not a code.
    assert_eq!(parse(r#"{"type":"error","message":"m"}"#).error_type, None);
    // Codes that are neither text nor numbers are nothing.
    let odd = parse(r#"{"error":{"message":"m","code":{"a":1},"type":[1],"status":7}}"#);
    assert_eq!((odd.code, odd.error_type, odd.status, odd.numeric_code), (None, None, None, None));
}

#[test]
fn html_text_empty_and_truncated_bodies_are_quoted_with_the_status() {
    let html = parse("<html><body><h1>502 Bad Gateway</h1></body></html>");
    assert_eq!(html.message, None);
    assert_eq!(
        html.message_or_status(502),
        "HTTP 502: <html><body><h1>502 Bad Gateway</h1></body></html>"
    );
    assert_eq!(parse("  \n ").message_or_status(503), "HTTP 503");
    assert_eq!(parse("").excerpt, None);
    assert_eq!(
        parse("upstream timed out\n").message_or_status(504),
        "HTTP 504: upstream timed out"
    );
    // A body cut in the middle of its JSON is text, not a half-read envelope.
    let cut = parse(r#"{"error":{"message":"Rate limit rea"#);
    assert_eq!(cut.message, None);
    assert_eq!(cut.message_or_status(429), r#"HTTP 429: {"error":{"message":"Rate limit rea"#);
    // JSON without a message is the status alone (its fields are no prose).
    assert_eq!(parse(r#"{"ok":false}"#).message_or_status(500), "HTTP 500");
}

#[test]
fn huge_and_deep_bodies_stay_bounded() {
    let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
    let body = serde_json::json!({"error": {"message": long}}).to_string();
    let message = parse(&body).message.unwrap();
    assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + "... [truncated 10 chars]".len());
    assert!(message.ends_with("... [truncated 10 chars]"));

    let page = format!("<html>{}</html>", "x".repeat(1 << 20));
    let excerpt = parse(&page).excerpt.unwrap();
    assert_eq!(excerpt.chars().count(), MAX_EXCERPT_CHARS);

    // Deeper than serde_json's recursion limit: read as text, never a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let read = parse(&deep);
    assert_eq!(read.message, None);
    assert_eq!(read.excerpt.unwrap().len(), MAX_EXCERPT_CHARS);

    // A list of many envelopes: the first with an `error` counts.
    let many = format!("[{}{{\"error\":{{\"message\":\"found\"}}}}]", "{},".repeat(10_000));
    assert_eq!(parse(&many).message.as_deref(), Some("found"));

    // Invalid protobuf durations are no delay.
    for delay in ["\"-1s\"", "\"1e400s\"", "\"NaNs\"", "\"5\"", "5"] {
        let body = format!(r#"{{"error":{{"details":[{{"retryDelay":{delay}}}]}}}}"#);
        assert_eq!(parse(&body).retry_delay, None, "{delay}");
    }
}

#[test]
fn context_length_is_read_from_the_message() {
    assert!(
        parse(r#"{"error":{"message":"This model's maximum context length is 8192"}}"#)
            .says_context_length()
    );
    assert!(parse(r#"{"message":"Prompt is too long: 210000 tokens"}"#).says_context_length());
    assert!(!parse(r#"{"message":"Rate limited"}"#).says_context_length());
    assert!(!parse("context window exceeded (but this is HTML)").says_context_length());
}
