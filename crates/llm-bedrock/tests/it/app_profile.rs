//! Through the public API over loopback: cache points for application
//! inference profile ARNs, decided by the profile name or by the control plane's
//! `GetInferenceProfile` (reached through the `controlPlaneUrl` option).
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::time::Duration;

use llm_bedrock::{Bedrock, BedrockProvider};
use llm_core::{AssistantMessage, Context, Message, Model, Provider, StopReason, StreamOptions};
use llm_testkit::eventstream::converse_text;
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Recorded, Server};
use serde_json::{Value, json};

const OPAQUE_ARN: &str =
    "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3d4e5f6";
const OPAQUE_PATH: &str = "/inference-profiles/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5f6";
const SONNET_4_5: &str =
    "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0";
const HAIKU_4_5: &str =
    "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0";
const NOVA: &str = "arn:aws:bedrock:us-west-2::foundation-model/amazon.nova-pro-v1:0";
const OPUS_4_7: &str =
    "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-opus-4-7-v1:0";

/// A `GetInferenceProfile` answer routing to `models`.
fn profile(models: &[&str]) -> Canned {
    let body = json!({
        "inferenceProfileArn": OPAQUE_ARN,
        "inferenceProfileId": "a1b2c3d4e5f6",
        "inferenceProfileName": "team-profile",
        "models": models.iter().map(|m| json!({"modelArn": m})).collect::<Vec<_>>(),
        "status": "ACTIVE",
        "type": "APPLICATION",
    });
    Canned::new(200, [("content-type", "application/json")], body.to_string())
}

fn server_error() -> Canned {
    Canned::new(
        500,
        [("content-type", "application/json"), ("x-amzn-ErrorType", "InternalServerException")],
        r#"{"message":"internal failure"}"#,
    )
}

async fn start(responses: Vec<Canned>) -> Server {
    Server::start(Responses::Sequence(responses), Chunking::Whole).await.unwrap()
}

fn model(id: &str, base_url: String) -> Model {
    Model {
        id: id.into(),
        api: llm_bedrock::API.into(),
        provider: llm_bedrock::PROVIDER.into(),
        base_url,
        ..Model::default()
    }
}

/// Bearer auth, cache retention unset, the control plane at `control_plane`.
fn options(control_plane: String) -> StreamOptions {
    let mut options = StreamOptions {
        api_key: Some(llm_core::ApiKey::new("test-key")),
        ..StreamOptions::default()
    };
    options.provider_options.insert("controlPlaneUrl".into(), json!(control_plane));
    options
}

fn context() -> Context {
    Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![Message::user("Hi")],
        ..Context::default()
    }
}

async fn ask(
    provider: &BedrockProvider,
    model: &Model,
    options: &StreamOptions,
) -> AssistantMessage {
    let message = provider.complete(model, &context(), options).await;
    assert_eq!(message.error_message, None);
    assert_eq!(message.text(), "ok");
    message
}

/// The cache points of a `ConverseStream` body: (on `system`, on the last message), each
/// the marker's JSON when present.
fn cache_points(request: &Recorded) -> (Option<Value>, Option<Value>) {
    assert_eq!(request.method, "POST");
    let body = request.json();
    let last = |blocks: &Value| {
        blocks.as_array().and_then(|b| b.last()).filter(|b| b.get("cachePoint").is_some()).cloned()
    };
    let messages = body["messages"].as_array().unwrap();
    (last(&body["system"]), last(&messages.last().unwrap()["content"]))
}

fn no_ttl() -> Option<Value> {
    Some(json!({"cachePoint": {"type": "default"}}))
}

fn assert_lookup(request: &Recorded) {
    assert_eq!((request.method.as_str(), request.path.as_str()), ("GET", OPAQUE_PATH));
    assert_eq!(request.header("authorization"), Some("Bearer test-key"));
    assert!(request.body.is_empty());
}

/// First case: a profile name that says Claude gets cache points (no ttl with
/// retention unset) without asking the control plane.
#[tokio::test]
async fn a_claude_profile_name_gets_cache_points_without_a_lookup() {
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let base = format!("http://{}", server.addr);
    let arn =
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/my-claude-profile";
    ask(&BedrockProvider::new(), &model(arn, base.clone()), &options(base)).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 1, "no GetInferenceProfile call");
    assert_eq!(cache_points(&recorded[0]), (no_ttl(), no_ttl()));
}

/// Second case: an opaque ARN routing to a Claude 4 and a model that does not
/// cache gets no cache points.
#[tokio::test]
async fn a_profile_routing_to_a_non_caching_model_gets_no_cache_points() {
    let server = start(vec![profile(&[SONNET_4_5, NOVA]), converse_text("ok").unwrap()]).await;
    let base = format!("http://{}", server.addr);
    ask(&BedrockProvider::new(), &model(OPAQUE_ARN, base.clone()), &options(base)).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    assert_lookup(&recorded[0]);
    assert_eq!(cache_points(&recorded[1]), (None, None));
}

/// An opaque ARN routing only to caching Claude models gets cache points; the answer is
/// asked once per ARN and shared by the provider's clones.
#[tokio::test]
async fn a_profile_routing_only_to_caching_claude_models_is_looked_up_once() {
    let server = start(vec![
        profile(&[SONNET_4_5, HAIKU_4_5]),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
    ])
    .await;
    let base = format!("http://{}", server.addr);
    let provider = BedrockProvider::new();
    let model = model(OPAQUE_ARN, base.clone());
    ask(&provider, &model, &options(base.clone())).await;
    ask(&provider.clone(), &model, &options(base)).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 3, "one lookup for two requests");
    assert_lookup(&recorded[0]);
    assert_eq!(cache_points(&recorded[1]), (no_ttl(), no_ttl()));
    assert_eq!(cache_points(&recorded[2]), (no_ttl(), no_ttl()));
}

/// Concurrent first requests for one ARN share one lookup.
#[tokio::test]
async fn concurrent_first_requests_share_one_lookup() {
    let server = start(vec![
        profile(&[SONNET_4_5]),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
    ])
    .await;
    let base = format!("http://{}", server.addr);
    let provider = BedrockProvider::new();
    let model = model(OPAQUE_ARN, base.clone());
    let options = options(base);
    futures_util::future::join3(
        ask(&provider, &model, &options),
        ask(&provider.clone(), &model, &options),
        ask(&provider, &model, &options),
    )
    .await;
    let recorded = server.recorded();
    let methods: Vec<&str> = recorded.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["GET", "POST", "POST", "POST"]);
    for request in &recorded[1..] {
        assert_eq!(cache_points(request), (no_ttl(), no_ttl()));
    }
}

/// Third case: a failing lookup leaves the heuristic in charge (an opaque name:
/// no cache points); that ARN is not asked again until the backoff passed, then it is.
#[tokio::test]
async fn a_failed_lookup_falls_back_to_the_heuristic_and_waits_before_asking_again() {
    let server = start(vec![
        server_error(),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
        profile(&[SONNET_4_5]),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
    ])
    .await;
    let base = format!("http://{}", server.addr);
    let backoff = Duration::from_millis(300);
    let provider = BedrockProvider::builder()
        .wire(Bedrock::default().with_profile_lookup_backoff(backoff))
        .build();
    let model = model(OPAQUE_ARN, base.clone());
    ask(&provider, &model, &options(base.clone())).await;
    ask(&provider.clone(), &model, &options(base.clone())).await;
    tokio::time::sleep(backoff + Duration::from_millis(100)).await;
    ask(&provider, &model, &options(base.clone())).await;
    ask(&provider, &model, &options(base.clone())).await;
    let recorded = server.recorded();
    let methods: Vec<&str> = recorded.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["GET", "POST", "POST", "GET", "POST", "POST"]);
    assert_lookup(&recorded[0]);
    assert_eq!(cache_points(&recorded[1]), (None, None), "the heuristic, after the failure");
    assert_eq!(cache_points(&recorded[2]), (None, None), "not asked again while waiting");
    assert_lookup(&recorded[3]);
    assert_eq!(cache_points(&recorded[4]), (no_ttl(), no_ttl()));
    assert_eq!(cache_points(&recorded[5]), (no_ttl(), no_ttl()), "the cached answer");
}

/// With the default backoff, a control plane that keeps failing is asked once, not once
/// per request.
#[tokio::test]
async fn a_failing_control_plane_is_not_asked_on_every_request() {
    let server = start(vec![
        server_error(),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
        converse_text("ok").unwrap(),
    ])
    .await;
    let base = format!("http://{}", server.addr);
    let provider = BedrockProvider::new();
    let model = model(OPAQUE_ARN, base.clone());
    for _ in 0..3 {
        ask(&provider, &model, &options(base.clone())).await;
    }
    let methods: Vec<String> = server.recorded().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["GET", "POST", "POST", "POST"]);
}

/// No lookup when cache retention is `none`: there is nothing to decide.
#[tokio::test]
async fn retention_none_sends_no_lookup() {
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let base = format!("http://{}", server.addr);
    let mut options = options(base.clone());
    options.cache_retention = llm_core::CacheRetention::None;
    ask(&BedrockProvider::new(), &model(OPAQUE_ARN, base), &options).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(cache_points(&recorded[0]), (None, None));
}

/// A control plane that accepts the connection and never answers: returns the address
/// and the task holding the connections.
async fn silent_control_plane() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (format!("http://{addr}"), task)
}

/// A hanging lookup is bounded by the lookup timeout; the request then goes on with the
/// heuristic.
#[tokio::test]
async fn a_hanging_lookup_times_out_and_the_request_goes_on() {
    let (control_plane, task) = silent_control_plane().await;
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let base = format!("http://{}", server.addr);
    let provider = BedrockProvider::builder()
        .wire(Bedrock::default().with_profile_lookup_timeout(Duration::from_millis(200)))
        .build();
    ask(&provider, &model(OPAQUE_ARN, base), &options(control_plane)).await;
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(cache_points(&recorded[0]), (None, None));
    task.abort();
}

/// Cancelling the request while the lookup waits ends it as aborted, and nothing is sent
/// to the runtime.
#[tokio::test]
async fn cancelling_the_request_cancels_the_lookup() {
    let (control_plane, task) = silent_control_plane().await;
    let server = start(vec![converse_text("ok").unwrap()]).await;
    let base = format!("http://{}", server.addr);
    let options = options(control_plane);
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let provider = BedrockProvider::builder()
        .wire(Bedrock::default().with_profile_lookup_timeout(Duration::from_secs(60)))
        .build();
    let message = provider.complete(&model(OPAQUE_ARN, base), &context(), &options).await;
    assert_eq!(message.stop_reason, StopReason::Aborted, "{message:?}");
    assert!(server.recorded().is_empty());
    task.abort();
}

/// The `temperature` a `ConverseStream` body sends, if any.
fn temperature(request: &Recorded) -> Option<Value> {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    body["inferenceConfig"].get("temperature").cloned()
}

/// The lookup also says whether a routed model rejects `temperature`
/// (Opus 4.7+); if any does, it is not sent, since the profile may pick that model. A
/// profile without such a model keeps it, and the answer is cached with the rest.
#[tokio::test]
async fn a_profile_routing_to_opus_4_7_drops_temperature() {
    for (models, kept) in
        [(&[SONNET_4_5, OPUS_4_7][..], false), (&[SONNET_4_5, HAIKU_4_5][..], true)]
    {
        let server = start(vec![
            profile(models),
            converse_text("ok").unwrap(),
            converse_text("ok").unwrap(),
        ])
        .await;
        let base = format!("http://{}", server.addr);
        let provider = BedrockProvider::new();
        let model = model(OPAQUE_ARN, base.clone());
        let options = StreamOptions { temperature: Some(0.2), ..options(base) };
        ask(&provider, &model, &options).await;
        ask(&provider, &model, &options).await;
        let recorded = server.recorded();
        assert_eq!(recorded.len(), 3, "{models:?}: one lookup for two requests");
        assert_lookup(&recorded[0]);
        for request in &recorded[1..] {
            let expected = kept.then(|| json!(0.2));
            assert_eq!(temperature(request), expected, "{models:?}");
        }
    }
}
