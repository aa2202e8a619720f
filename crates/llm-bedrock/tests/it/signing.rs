//! SigV4 per attempt, clock-skew correction and the retry table, through the public API
//! over loopback.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::time::{Duration, SystemTime};

use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use llm_bedrock::BedrockProvider;
use llm_core::{
    AssistantMessage, Context, ErrorKind, Message, Model, Provider, RetryPolicy, StreamOptions,
};
use llm_testkit::eventstream::converse_text;
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Recorded, Server};
use serde_json::json;

fn exception(status: u16, name: &str, message: &str, date: Option<SystemTime>) -> Canned {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-amzn-ErrorType".to_owned(), format!("{name}:http://internal.amazon.com/coral/")),
    ];
    if let Some(date) = date {
        headers.push(("date".to_owned(), DateTime::from(date).fmt(Format::HttpDate).unwrap()));
    }
    Canned::new(status, headers, json!({ "message": message }).to_string())
}

/// Keys in an injected environment: the process environment is never read or changed.
fn signing_provider() -> BedrockProvider {
    BedrockProvider::builder()
        .env([
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            ("AWS_REGION", "us-west-2"),
            ("HOME", "/nonexistent"),
        ])
        .build()
}

fn model(base_url: String) -> Model {
    Model {
        id: "amazon.nova-pro-v1:0".into(),
        api: llm_bedrock::API.into(),
        provider: llm_bedrock::PROVIDER.into(),
        base_url,
        ..Model::default()
    }
}

fn options(retry: RetryPolicy) -> StreamOptions {
    StreamOptions { retry, ..StreamOptions::default() }
}

async fn ask(
    provider: &BedrockProvider,
    server: &Server,
    options: &StreamOptions,
) -> AssistantMessage {
    let context = Context { messages: vec![Message::user("Hi")], ..Context::default() };
    provider.complete(&model(format!("http://{}", server.addr)), &context, options).await
}

/// The signing time of a request (`x-amz-date`, `YYYYMMDDTHHMMSSZ`).
fn signed_at(request: &Recorded) -> SystemTime {
    let d = request.header("x-amz-date").unwrap();
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    );
    SystemTime::try_from(DateTime::from_str(&iso, Format::DateTime).unwrap()).unwrap()
}

fn within(time: SystemTime, from: SystemTime, to: SystemTime) -> bool {
    let slack = Duration::from_secs(2);
    time + slack >= from && time <= to + slack
}

/// A retry is signed when it is sent: after a backoff that moved the clock, its
/// `x-amz-date` and signature are new, not the first attempt's.
#[tokio::test]
async fn each_attempt_is_signed_when_it_is_sent() {
    let server = Server::start(
        Responses::Sequence(vec![
            exception(500, "InternalServerException", "try again", None),
            converse_text("ok").unwrap(),
        ]),
        Chunking::Whole,
    )
    .await
    .unwrap();
    let retry = RetryPolicy {
        max_retries: 1,
        initial_delay: Duration::from_millis(1_100),
        jitter: false,
        ..RetryPolicy::default()
    };
    let start = SystemTime::now();
    let message = ask(&signing_provider(), &server, &options(retry)).await;
    let end = SystemTime::now();
    assert_eq!(message.error_message, None);
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    let (first, retry) = (&recorded[0], &recorded[1]);
    assert_ne!(first.header("x-amz-date"), retry.header("x-amz-date"));
    assert_ne!(first.header("authorization"), retry.header("authorization"));
    assert!(signed_at(retry) > signed_at(first));
    for request in [first, retry] {
        assert!(within(signed_at(request), start, end));
        assert!(request.header("authorization").unwrap().contains("/us-west-2/bedrock/"));
    }
    assert_eq!(first.body, retry.body);
}

/// A signature rejected for its time, with the server's `Date` two hours ahead, is signed
/// again with the server's clock and sent again at once (no retry budget needed), and the
/// provider keeps the offset for the next request.
#[tokio::test]
async fn a_signature_rejected_for_clock_skew_is_signed_again_with_the_server_clock() {
    let server_time = SystemTime::now() + Duration::from_secs(2 * 3600);
    let server = Server::start(
        Responses::Sequence(vec![
            exception(
                403,
                "InvalidSignatureException",
                "Signature not yet current: is still later than the server time",
                Some(server_time),
            ),
            converse_text("ok").unwrap(),
            converse_text("ok").unwrap(),
        ]),
        Chunking::Whole,
    )
    .await
    .unwrap();
    let provider = signing_provider();
    let message = ask(&provider, &server, &options(RetryPolicy::none())).await;
    assert_eq!(message.error_message, None);
    let later = ask(&provider.clone(), &server, &options(RetryPolicy::none())).await;
    assert_eq!(later.error_message, None);
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 3);
    let local = SystemTime::now();
    assert!(within(signed_at(&recorded[0]), local - Duration::from_secs(60), local));
    for corrected in &recorded[1..] {
        assert!(
            within(signed_at(corrected), server_time, server_time + Duration::from_secs(60)),
            "signed with the server's clock"
        );
    }
}

/// The correction happens once per request: a server that rejects the corrected signature
/// too ends the request with that auth error, after exactly two requests.
#[tokio::test]
async fn a_second_rejection_for_clock_skew_is_not_retried() {
    let server_time = SystemTime::now() - Duration::from_secs(3600);
    let reject = exception(
        403,
        "InvalidSignatureException",
        "Signature expired: now earlier",
        Some(server_time),
    );
    let server = Server::start(
        Responses::Sequence(vec![
            reject.clone(),
            reject.clone(),
            reject,
            converse_text("ok").unwrap(),
        ]),
        Chunking::Whole,
    )
    .await
    .unwrap();
    let message = ask(&signing_provider(), &server, &options(RetryPolicy::default())).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2, "one correction, no more");
    assert_eq!(message.error_type.as_deref(), Some(ErrorKind::Auth.as_str()), "{message:?}");
    assert!(message.error_message.unwrap().contains("Signature expired"));
}

/// A wrong key is no clock problem: the rejection is not sent again.
#[tokio::test]
async fn a_signature_mismatch_with_agreeing_clocks_is_not_sent_again() {
    let server = Server::start(
        Responses::Sequence(vec![
            exception(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
                Some(SystemTime::now()),
            ),
            converse_text("ok").unwrap(),
        ]),
        Chunking::Whole,
    )
    .await
    .unwrap();
    let message = ask(&signing_provider(), &server, &options(RetryPolicy::default())).await;
    assert_eq!(server.recorded().len(), 1);
    assert_eq!(message.error_type.as_deref(), Some(ErrorKind::Auth.as_str()));
}

/// Every status of the shared retry table is retried, a 409 `ConflictException` included,
/// and so is a throttling exception whatever status carries it.
#[tokio::test]
async fn retryable_statuses_and_exceptions_are_retried() {
    let cases = [
        (408, "ModelTimeoutException"),
        (409, "ConflictException"),
        (429, "ThrottlingException"),
        (500, "InternalServerException"),
        (503, "ServiceUnavailableException"),
        (529, "InternalServerException"),
        (400, "ThrottlingException"),
    ];
    let retry = RetryPolicy {
        max_retries: 1,
        initial_delay: Duration::from_millis(1),
        jitter: false,
        ..RetryPolicy::default()
    };
    for (status, name) in cases {
        let server = Server::start(
            Responses::Sequence(vec![
                exception(status, name, "m", None),
                converse_text("ok").unwrap(),
            ]),
            Chunking::Whole,
        )
        .await
        .unwrap();
        let message = ask(&signing_provider(), &server, &options(retry.clone())).await;
        assert_eq!(message.error_message, None, "HTTP {status} {name}");
        assert_eq!(server.recorded().len(), 2, "HTTP {status} {name}");
    }
}
