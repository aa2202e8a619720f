#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;

/// 2026-01-01T00:00:00Z.
fn local() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600)
}

#[test]
fn the_clock_signs_with_the_learned_offset_either_way() {
    let clock = Clock::with_local(local);
    assert_eq!(clock.now(), local());
    let ahead = local() + Duration::from_secs(3_600);
    clock.learn(ahead);
    assert_eq!((clock.now(), clock.offset_ms()), (ahead, 3_600_000));
    let behind = local() - Duration::from_millis(90_500);
    clock.clone().learn(behind);
    assert_eq!((clock.now(), clock.offset_ms()), (behind, -90_500), "clones share the offset");
    assert!(format!("{clock:?}").contains("-90500"));
}

#[test]
fn an_attempt_signs_at_the_time_it_is_given() {
    let env = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_owned()),
        _ => None,
    };
    let model = Model {
        id: "amazon.nova-pro-v1:0".into(),
        api: crate::API.into(),
        provider: PROVIDER.into(),
        ..Model::default()
    };
    let context = Context { messages: vec![llm_core::Message::user("hi")], ..Context::default() };
    let options = StreamOptions::default();
    let unsigned = build(&model, &context, &options, &env, None).unwrap();
    let auth = auth::resolve_auth(&options, &env).unwrap();
    let date = |request: &HttpRequest| {
        request.headers.get("x-amz-date").and_then(|v| v.to_str().ok()).map(str::to_owned)
    };
    let first = sign(&unsigned, auth.clone(), local()).unwrap();
    let later = sign(&unsigned, auth, local() + Duration::from_secs(600)).unwrap();
    assert_eq!(date(&first).as_deref(), Some("20260101T000000Z"));
    assert_eq!(date(&later).as_deref(), Some("20260101T001000Z"));
    assert_eq!(first.body, later.body, "the body is converted once");
    assert!(!unsigned.http.headers.contains_key("authorization"));
}
