//! `claw --otlp`: every provider's recorded session, replayed by `claw` with the export on,
//! arrives at a loopback OTLP/HTTP receiver that decodes it with the protocol's own
//! protobuf types; the span tree (`invoke_agent` > `turn` > `chat` / `execute_tool`), the
//! GenAI attributes of both convention versions (the response id and model as the recording
//! sends them), the metrics, and the absence of any key are checked; a request the server
//! refuses carries `error.type`. Without `--otlp` nothing arrives, even with the exporter's
//! variables set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use prost::Message as _;

/// What the receiver got: (path, body) per request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A loopback OTLP/HTTP receiver: answers every POST with an empty 200 and keeps its body.
fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let keep = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let keep = Arc::clone(&keep);
            std::thread::spawn(move || serve(stream, &keep));
        }
    });
    (url, received)
}

/// One keep-alive connection: requests until the client closes it.
fn serve(stream: TcpStream, keep: &Received) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        keep.lock().unwrap().push((path, body));
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// `claw` with no keys, no config and its own data folder (as in `cli.rs`).
fn claw() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claw"));
    let home = std::env::temp_dir().join(format!("claw-otlp-home-{}", std::process::id()));
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") || name.ends_with("_API_KEY") || name.starts_with("CLAW_") {
            cmd.env_remove(name);
        }
    }
    cmd.env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .stdin(Stdio::null())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

#[derive(Debug)]
struct Span {
    name: String,
    id: Vec<u8>,
    parent: Vec<u8>,
    attributes: HashMap<String, Any>,
}

impl Span {
    fn str(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(Any::StringValue(s)) => Some(s),
            _ => None,
        }
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self.attributes.get(key) {
            Some(Any::IntValue(i)) => Some(*i),
            _ => None,
        }
    }
}

fn spans(received: &Received) -> Vec<Span> {
    let mut out = Vec::new();
    for (path, body) in received.lock().unwrap().iter() {
        if path != "/v1/traces" {
            continue;
        }
        let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf");
        for resource in request.resource_spans {
            let service = resource.resource.as_ref().and_then(|r| {
                r.attributes.iter().find(|a| a.key == "service.name")?.value.clone()?.value
            });
            assert_eq!(service, Some(Any::StringValue("claw".into())));
            for scope in resource.scope_spans {
                for span in scope.spans {
                    let attributes = span
                        .attributes
                        .into_iter()
                        .filter_map(|kv| Some((kv.key, kv.value?.value?)))
                        .collect();
                    out.push(Span {
                        name: span.name,
                        id: span.span_id,
                        parent: span.parent_span_id,
                        attributes,
                    });
                }
            }
        }
    }
    out
}

/// (metric name, unit, data point count, attribute values seen) per histogram.
fn histograms(received: &Received) -> HashMap<String, (String, u64, Vec<String>)> {
    let mut out: HashMap<String, (String, u64, Vec<String>)> = HashMap::new();
    for (path, body) in received.lock().unwrap().iter() {
        if path != "/v1/metrics" {
            continue;
        }
        let request = ExportMetricsServiceRequest::decode(body.as_slice()).expect("OTLP protobuf");
        for scope in request.resource_metrics.into_iter().flat_map(|r| r.scope_metrics) {
            for metric in scope.metrics {
                let Some(Data::Histogram(histogram)) = metric.data else { continue };
                let entry = out.entry(metric.name).or_insert((metric.unit, 0, Vec::new()));
                for point in histogram.data_points {
                    entry.1 += point.count;
                    for kv in point.attributes {
                        if let Some(Any::StringValue(v)) = kv.value.and_then(|v| v.value) {
                            entry.2.push(format!("{}={v}", kv.key));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Runs `claw --provider <provider> --otlp <receiver>`'s replay and returns what arrived;
/// `latest` opts in to the latest conventions and to content.
fn export(provider: &str, latest: bool) -> (Vec<Span>, Received) {
    export_with(provider, latest.then_some("gen_ai_latest_experimental"), latest)
}

/// [`export`] with each switch on its own: the opt-in list and the content capture.
fn export_with(provider: &str, opt_in: Option<&str>, capture: bool) -> (Vec<Span>, Received) {
    let (url, received) = receiver();
    let mut cmd = claw();
    cmd.args(["--replay", "--provider", provider, "--otlp", &url]);
    if let Some(opt_in) = opt_in {
        cmd.env("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in);
    }
    if capture {
        cmd.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{provider}: {stderr}");
    (spans(&received), received)
}

/// A string leaf of `value` at the first of `paths` (each a list of object keys) that has one.
fn first_string(value: &serde_json::Value, paths: &[&[&str]]) -> Option<String> {
    paths.iter().find_map(|path| {
        let mut at = value;
        for key in *path {
            at = at.get(key)?;
        }
        at.as_str().map(str::to_owned)
    })
}

/// The response id and model each turn of a recorded session sends, read from the recorded
/// bytes with `serde_json` (the first event that names them): `message` of Anthropic's
/// `message_start`, `response` of `response.created`, Gemini's `responseId` and
/// `modelVersion`, the chunks' `id` and `model`; `None` where the wire format sends none.
fn recorded_identities(session: &str) -> Vec<(Option<String>, Option<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions").join(session);
    let exchanges: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("exchanges.json")).unwrap())
            .unwrap();
    let ids: &[&[&str]] = &[&["message", "id"], &["response", "id"], &["responseId"], &["id"]];
    let models: &[&[&str]] =
        &[&["message", "model"], &["response", "model"], &["modelVersion"], &["model"]];
    let mut out = Vec::new();
    for exchange in exchanges.as_array().unwrap() {
        let body = exchange["body"].as_str().unwrap();
        // An AWS event stream is committed beside its JSON source, whose payloads are read.
        let payloads: Vec<serde_json::Value> = match body.strip_suffix(".eventstream") {
            Some(stem) => {
                let source = std::fs::read_to_string(dir.join(format!("{stem}.frames.json")));
                let frames: Vec<serde_json::Value> =
                    serde_json::from_str(&source.unwrap()).unwrap();
                frames.into_iter().map(|f| f["payload"].clone()).collect()
            }
            None => std::fs::read_to_string(dir.join(body))
                .unwrap()
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .filter(|d| *d != "[DONE]")
                .map(|d| serde_json::from_str(d).unwrap())
                .collect(),
        };
        let id = payloads.iter().find_map(|p| first_string(p, ids));
        let model = payloads.iter().find_map(|p| first_string(p, models));
        out.push((id, model));
    }
    out
}

/// The response id and model of every `chat` span, and of every recorded turn of `session`,
/// must be the same (in any order: each turn has its own id).
fn check_response_identity(provider: &str, spans: &[Span], session: &str) {
    let mut recorded = recorded_identities(session);
    let mut seen: Vec<(Option<String>, Option<String>)> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .map(|s| {
            let id = s.str("gen_ai.response.id").map(str::to_owned);
            (id, s.str("gen_ai.response.model").map(str::to_owned))
        })
        .collect();
    recorded.sort();
    seen.sort();
    assert_eq!(seen, recorded, "{provider}: response id and model, spans vs the recording");
}

/// The span tree and attributes every provider's session must show.
fn check_tree(provider: &str, spans: &[Span], latest: bool, semconv_provider: &str) {
    let by_name = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let agents = by_name("invoke_agent");
    assert_eq!(agents.len(), 1, "{provider}: {spans:#?}");
    let agent = agents[0];
    assert_eq!(agent.str("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.str("clawcall.end_reason"), Some("completed"), "{provider}");
    let turns = by_name("turn");
    assert_eq!(turns.len(), 3, "{provider}: three turns");
    assert!(turns.iter().all(|t| t.parent == agent.id), "{provider}: turns beneath the run");
    let under_turn = |s: &&Span| turns.iter().any(|t| t.id == s.parent);

    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert_eq!(chats.len(), 3, "{provider}: one chat span per request");
    let provider_key = if latest { "gen_ai.provider.name" } else { "gen_ai.system" };
    let other_key = if latest { "gen_ai.system" } else { "gen_ai.provider.name" };
    for chat in &chats {
        assert!(under_turn(chat), "{provider}: chat beneath a turn");
        let model = chat.str("gen_ai.request.model").unwrap();
        assert_eq!(chat.name, format!("chat {model}"));
        assert_eq!(chat.str("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.str(provider_key), Some(semconv_provider), "{provider}: {chat:?}");
        assert_eq!(chat.str(other_key), None, "{provider}: one version at a time");
        assert_eq!(chat.str("server.address"), Some("127.0.0.1"), "{provider}: {chat:?}");
        assert!(chat.int("server.port").is_some_and(|p| p > 0), "{provider}: {chat:?}");
        assert!(
            chat.int("gen_ai.usage.input_tokens").is_some_and(|n| n > 0),
            "{provider}: {chat:?}"
        );
        assert!(chat.int("gen_ai.usage.output_tokens").is_some_and(|n| n > 0), "{provider}");
        assert!(chat.str("gen_ai.response.finish_reasons").is_some(), "{provider}");
        assert_eq!(chat.str("error.type"), None, "{provider}");
        let ttfc = chat.attributes.get("gen_ai.response.time_to_first_chunk");
        let content = chat.str("gen_ai.input.messages");
        if latest {
            assert!(matches!(ttfc, Some(Any::DoubleValue(s)) if *s >= 0.0), "{provider}: {chat:?}");
            assert!(
                chat.int("gen_ai.usage.cache_read.input_tokens").is_some(),
                "{provider}: {chat:?}"
            );
            let messages: serde_json::Value = serde_json::from_str(content.unwrap()).unwrap();
            assert_eq!(messages[0]["role"], "user", "{provider}: {messages}");
            assert!(chat.str("gen_ai.output.messages").is_some(), "{provider}");
        } else {
            assert!(ttfc.is_none() && content.is_none(), "{provider}: 1.36 has neither");
        }
    }
    // The first two answers asked for tools; the last one ends the run.
    let reasons: Vec<_> =
        chats.iter().filter_map(|c| c.str("gen_ai.response.finish_reasons")).collect();
    assert_eq!(reasons.iter().filter(|r| **r == "tool_call").count(), 2, "{provider}: {reasons:?}");

    let tools: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("execute_tool ")).collect();
    assert!(tools.len() >= 2, "{provider}: {tools:#?}");
    for tool in &tools {
        assert!(under_turn(tool), "{provider}: tool calls beneath a turn");
        let name = tool.str("gen_ai.tool.name").unwrap();
        assert_eq!(tool.name, format!("execute_tool {name}"));
        assert!(tool.str("gen_ai.tool.call.id").is_some_and(|id| !id.is_empty()));
        assert_eq!(tool.str("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.str("gen_ai.tool.call.arguments").is_some(), latest, "{provider}");
    }
    // The replay's key never leaves in a span.
    for span in spans {
        for (key, value) in &span.attributes {
            assert!(
                !format!("{value:?}").contains("replay-no-key"),
                "{provider}: {key} of {}",
                span.name
            );
        }
    }
}

#[test]
fn every_provider_session_arrives_as_a_span_tree_with_genai_attributes() {
    // (claw's name, the conventions' name, the recorded session's folder)
    let providers = [
        ("anthropic", "anthropic", "anthropic"),
        ("openai", "openai", "openai-completions"),
        ("openai-responses", "openai", "openai-responses"),
        ("google", "gcp.gemini", "google"),
        ("mistral", "mistral_ai", "mistral"),
        ("bedrock", "aws.bedrock", "bedrock"),
    ];
    for (i, (provider, semconv_provider, session)) in providers.into_iter().enumerate() {
        // Both versions of the conventions, alternately.
        let latest = i % 2 == 0;
        let (spans, _) = export(provider, latest);
        check_tree(provider, &spans, latest, semconv_provider);
        check_response_identity(provider, &spans, session);
    }
}

#[test]
fn the_recordings_name_their_response_ids_and_models() {
    // The oracle reads what it should: every SSE session names both per turn, and Bedrock's
    // event stream names neither (the model that answered is the one asked for).
    for session in ["anthropic", "openai-completions", "openai-responses", "google", "mistral"] {
        let identities = recorded_identities(session);
        assert_eq!(identities.len(), 3, "{session}");
        assert!(identities.iter().all(|(id, model)| id.is_some() && model.is_some()), "{session}");
    }
    assert_eq!(recorded_identities("bedrock"), vec![(None, None); 3]);
}

#[test]
fn a_refused_request_carries_error_type_and_the_status() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let providers = ["anthropic", "openai-completions", "openai-responses", "google", "mistral"];
    for (i, provider) in providers.into_iter().chain(["bedrock"]).enumerate() {
        // An authentication failure and an invalid request, alternately.
        let scenario = if i % 2 == 0 { "http-401-auth" } else { "http-400-invalid-request" };
        let dir = root.join(provider).join(scenario);
        // The oracle: the status the server sends, and the error kind of the reviewed transcript.
        let exchanges: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("exchanges.json")).unwrap())
                .unwrap();
        let status = exchanges[0]["status"].as_i64().unwrap();
        let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
        let kind = expected
            .lines()
            .find_map(|l| l.strip_prefix("error error kind="))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap();
        let (url, received) = receiver();
        let out = claw().arg("--replay").arg(&dir).args(["--otlp", &url]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{provider}/{scenario} failed: {stderr}");
        let spans = spans(&received);
        let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
        assert_eq!(chats.len(), 1, "{provider}/{scenario}: {spans:#?}\n{stderr}");
        let chat = chats[0];
        assert_eq!(chat.str("error.type"), Some(kind), "{provider}/{scenario}: {chat:?}");
        assert_eq!(chat.int("http.response.status_code"), Some(status), "{provider}: {chat:?}");
        assert_eq!(chat.str("gen_ai.response.id"), None, "{provider}: no response, no id");
        assert!(spans.iter().any(|s| s.name == "invoke_agent"), "{provider}: {spans:#?}");
        for span in &spans {
            for value in span.attributes.values() {
                assert!(!format!("{value:?}").contains("replay-no-key"), "{provider}: {span:?}");
            }
        }
    }
}

#[test]
fn metrics_arrive_with_the_conventions_units_and_attributes() {
    let (_, received) = export("anthropic", true);
    let histograms = histograms(&received);
    let (unit, count, attributes) = &histograms["gen_ai.client.operation.duration"];
    assert_eq!(unit, "s");
    assert_eq!(*count, 3, "one per request");
    assert!(attributes.contains(&"gen_ai.provider.name=anthropic".to_owned()), "{attributes:?}");
    assert!(attributes.contains(&"gen_ai.request.model=claude-sonnet-4-5".to_owned()));
    let (unit, count, attributes) = &histograms["gen_ai.client.token.usage"];
    assert_eq!(unit, "{token}");
    assert_eq!(*count, 6, "input and output per request");
    assert!(attributes.contains(&"gen_ai.token.type=input".to_owned()), "{attributes:?}");
    assert!(attributes.contains(&"gen_ai.token.type=output".to_owned()));
}

#[test]
fn content_needs_both_the_latest_conventions_and_the_capture_switch() {
    let content_keys = [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ];
    // The latest conventions without the capture switch; the switch with the default ones
    // (which have no content attributes); an opt-in list that only looks alike.
    for (opt_in, capture) in [
        (Some("http,gen_ai_latest_experimental"), false),
        (None, true),
        (Some("gen_ai_latest_experimental_x"), true),
    ] {
        let (spans, _) = export_with("google", opt_in, capture);
        assert!(spans.iter().any(|s| s.name.starts_with("chat ")), "{spans:#?}");
        let latest =
            opt_in.is_some_and(|o| o.split(',').any(|i| i == "gen_ai_latest_experimental"));
        for span in &spans {
            for key in content_keys {
                assert!(span.str(key).is_none(), "{opt_in:?}, {capture}: {key} on {}", span.name);
            }
            if span.name.starts_with("chat ") {
                let provider_key = if latest { "gen_ai.provider.name" } else { "gen_ai.system" };
                assert_eq!(span.str(provider_key), Some("gcp.gemini"), "{opt_in:?}: {span:?}");
            }
        }
    }
}

#[test]
fn the_config_key_exports_like_the_flag() {
    let (url, received) = receiver();
    let dir = std::env::temp_dir().join(format!("claw-otlp-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("otlp = {:?}\n", url)).unwrap();
    let out = claw()
        .args(["--replay", "--provider", "mistral", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    check_tree("mistral (config)", &spans(&received), false, "mistral_ai");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_otlp_nothing_is_exported() {
    let (url, received) = receiver();
    // The exporter's own variables alone start nothing: only `--otlp` (or the config) does.
    let out = claw()
        .args(["--replay"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(received.lock().unwrap().is_empty());
}

#[test]
fn a_bad_endpoint_is_a_usage_error_that_hides_a_password() {
    let out = claw()
        .args(["--replay", "--otlp", "https://me:hunter2@collector.example"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--otlp") && !stderr.contains("hunter2"), "{stderr}");
}
