#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use serde_json::json;

use super::*;
use crate::event::Delta;
use crate::provider::Capabilities;
use crate::raw::scripted::{ScriptedProvider, ScriptedTurn};
use crate::types::{Message, ToolCall};

const INFO: ProviderInfo = ProviderInfo {
    name: "acme",
    api: "acme-api",
    provider: "acme",
    default_base_url: "http://127.0.0.1:1",
    key_env: &[],
    capabilities: Capabilities::NONE,
    models: &[],
    output: &[
        OutputFamily::new("old-", OutputMode::Unsupported, "old"),
        OutputFamily::new("tooly", OutputMode::Tool, "tool models"),
        OutputFamily::new("", OutputMode::Native, "the rest"),
    ],
};

fn model(id: &str) -> Model {
    Model { id: id.to_owned(), api: "acme-api".to_owned(), ..Model::default() }
}

fn person() -> OutputFormat {
    OutputFormat::new(
        "person",
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
            "additionalProperties": false
        }),
    )
}

fn with(format: OutputFormat) -> StreamOptions {
    StreamOptions { output: Some(format), ..StreamOptions::default() }
}

fn ctx() -> Context {
    Context { messages: vec![Message::user("John is 42")], ..Context::default() }
}

#[test]
fn the_first_row_whose_pattern_the_id_contains_wins_and_no_row_is_unsupported() {
    assert_eq!(INFO.output_mode("old-tooly"), OutputMode::Unsupported);
    assert_eq!(INFO.output_mode("new-tooly-2"), OutputMode::Tool);
    assert_eq!(INFO.output_mode("anything"), OutputMode::Native);
    let none = ProviderInfo { output: &[], ..INFO };
    assert_eq!(none.output_mode("anything"), OutputMode::Unsupported);
}

#[test]
fn no_format_plans_nothing_and_an_unsupported_model_is_a_typed_error() {
    assert_eq!(
        plan(&INFO, "acme", &model("x"), &ctx(), &StreamOptions::default(), true).unwrap(),
        None
    );
    let error = plan(&INFO, "acme", &model("old-1"), &ctx(), &with(person()), true).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unsupported);
    assert_eq!(error.code.as_deref(), Some("output_format_unsupported"));
    assert!(!error.retryable);
    assert!(error.message.contains("old-1"), "{}", error.message);
}

#[test]
fn a_strict_format_is_rewritten_only_where_the_api_asks_and_the_plan_restores_it() {
    let strict = plan(&INFO, "acme", &model("x"), &ctx(), &with(person()), true).unwrap().unwrap();
    assert_eq!(strict.mode, OutputMode::Native);
    assert!(strict.strict);
    assert_eq!(strict.schema["required"], json!(["name", "age"]));
    assert_eq!(strict.schema["properties"]["age"]["type"], json!(["integer", "null"]));
    let mut answer = json!({"name": "John", "age": null});
    assert!(strict.restore.restore(&mut answer));
    assert_eq!(answer, json!({"name": "John"}));

    let loose = plan(&INFO, "acme", &model("x"), &ctx(), &with(person()), false).unwrap().unwrap();
    assert!(!loose.strict);
    assert_eq!(loose.schema, person().schema);
}

#[test]
fn a_schema_that_cannot_be_strict_is_refused_unless_the_format_is_loose() {
    let format = OutputFormat::new(
        "f",
        json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}),
    );
    let error = plan(&INFO, "acme", &model("x"), &ctx(), &with(format.clone()), true).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    assert!(error.message.contains("/properties/a/minLength"), "{}", error.message);
    let loose = with(format.with_strict(false));
    assert!(plan(&INFO, "acme", &model("x"), &ctx(), &loose, true).unwrap().is_some());
}

#[test]
fn bad_names_tool_collisions_and_conflicting_tool_choices_are_invalid_requests() {
    for name in ["", "has space", &"x".repeat(65)] {
        let format = OutputFormat { name: name.to_owned(), ..person() };
        let error = plan(&INFO, "acme", &model("x"), &ctx(), &with(format), true).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidRequest, "{name:?}");
    }
    let mut context = ctx();
    context.tools.push(person().as_tool());
    let error = plan(&INFO, "acme", &model("tooly"), &context, &with(person()), true).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    let options =
        StreamOptions { tool_choice: Some(ToolChoice::Tool("other".into())), ..with(person()) };
    let error = plan(&INFO, "acme", &model("tooly"), &ctx(), &options, true).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    // `none` asks for no other tool: the forced format tool keeps to it (an agent's
    // final answer turn sends it).
    let none = StreamOptions { tool_choice: Some(ToolChoice::None), ..with(person()) };
    assert!(plan(&INFO, "acme", &model("tooly"), &ctx(), &none, true).unwrap().is_some());
    // A native format leaves tools and tool choice alone.
    assert!(plan(&INFO, "acme", &model("x"), &context, &options, true).unwrap().is_some());
}

#[test]
fn check_names_what_is_wrong_with_a_format_before_it_is_used() {
    assert_eq!(person().check(), Ok(()));
    let cases = [
        (OutputFormat { name: "a b".into(), ..person() }, "[A-Za-z0-9_-]"),
        (OutputFormat::new("f", json!([1])), "JSON object"),
        (OutputFormat::new("f", json!({"type": "string"})), "root"),
        (OutputFormat::new("f", json!({"properties": {}})), "root"),
        (OutputFormat::new("f", json!({"type": "object", "minProperties": "two"})), "compile"),
        (
            OutputFormat::new("f", json!({"type": "object", "$ref": "https://example.com/s.json"})),
            "compile",
        ),
    ];
    for (format, expected) in cases {
        let error = format.check().unwrap_err();
        assert!(error.contains(expected), "{:?}: {error}", format.schema);
    }
}

fn text_message(text: &str, stop: StopReason) -> AssistantMessage {
    AssistantMessage {
        content: vec![AssistantContent::Text(crate::types::TextContent {
            text: text.to_owned(),
            text_signature: None,
        })],
        stop_reason: stop,
        ..AssistantMessage::default()
    }
}

#[test]
fn outcomes_valid_invalid_not_json_refused_cut_off_and_failed() {
    let f = person();
    assert_eq!(
        outcome(&f, &text_message(r#"{"name":"John","age":42}"#, StopReason::Stop), None),
        StructuredOutcome::Valid(json!({"name": "John", "age": 42}))
    );
    let StructuredOutcome::Invalid { value, violations } =
        outcome(&f, &text_message(r#"{"age":"42"}"#, StopReason::Stop), None)
    else {
        panic!("expected invalid")
    };
    assert_eq!(value, Some(json!({"age": "42"})));
    let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
    assert!(paths.contains(&"name") && paths.contains(&"age"), "{paths:?}");

    let StructuredOutcome::Invalid { value: None, violations } =
        outcome(&f, &text_message("Sure! Here", StopReason::Stop), None)
    else {
        panic!("expected not JSON")
    };
    assert!(violations[0].message.starts_with("the answer is not JSON"), "{violations:?}");

    assert_eq!(
        outcome(&f, &text_message(r#"{"name":"Jo"#, StopReason::Length), None),
        StructuredOutcome::CutOff(json!({"name": "Jo"}))
    );
    let refused = Error::new(ErrorKind::Refused, "acme", "no");
    assert_eq!(
        outcome(&f, &text_message("", StopReason::Error), Some(&refused)),
        StructuredOutcome::Refused(refused)
    );
    let failed = Error::new(ErrorKind::Overloaded, "acme", "busy");
    assert_eq!(
        outcome(&f, &text_message("", StopReason::Error), Some(&failed)),
        StructuredOutcome::Failed(failed)
    );
}

#[test]
fn a_collected_message_carries_its_own_error_and_outcomes_serialize_as_one_json_line() {
    let f = person();
    let mut refused = text_message("", StopReason::Error);
    refused.error_type = Some("refused".into());
    refused.error_message = Some("no".into());
    refused.error_status = Some(400);
    let StructuredOutcome::Refused(error) = message_outcome(&f, &refused) else {
        panic!("expected a refusal")
    };
    assert_eq!(
        (error.kind, error.message.as_str(), error.status),
        (ErrorKind::Refused, "no", Some(400))
    );
    let mut unknown = text_message("", StopReason::Error);
    unknown.error_type = Some("no such kind".into());
    assert!(matches!(
        message_outcome(&f, &unknown),
        StructuredOutcome::Failed(Error { kind: ErrorKind::Provider, .. })
    ));
    let aborted = text_message(r#"{"name":"Jo"}"#, StopReason::Aborted);
    assert!(matches!(
        message_outcome(&f, &aborted),
        StructuredOutcome::Failed(Error { kind: ErrorKind::Aborted, .. })
    ));
    assert_eq!(
        message_outcome(&f, &text_message(r#"{"name":"Jo"}"#, StopReason::Stop)),
        StructuredOutcome::Valid(json!({"name": "Jo"}))
    );

    let lines = [
        (StructuredOutcome::Valid(json!({"a": 1})), json!({"status": "valid", "value": {"a": 1}})),
        (
            StructuredOutcome::Invalid {
                value: None,
                violations: vec![Violation { path: "root".into(), message: "m".into() }],
            },
            json!({"status": "invalid", "value": null, "violations": [{"path": "root", "message": "m"}]}),
        ),
        (StructuredOutcome::CutOff(json!([1])), json!({"status": "cut_off", "value": [1]})),
        (
            StructuredOutcome::Refused(Error::new(ErrorKind::Refused, "acme", "no")),
            json!({"status": "refused", "error": "acme: refused: no"}),
        ),
        (
            StructuredOutcome::Failed(Error::new(ErrorKind::Transport, "acme", "reset")),
            json!({"status": "failed", "error": "acme: transport: reset"}),
        ),
    ];
    for (outcome, expected) in lines {
        assert_eq!(serde_json::to_value(&outcome).unwrap(), expected);
    }
}

#[test]
fn strict_nulls_for_omitted_properties_are_dropped_but_a_valid_null_is_kept() {
    let f = person();
    assert_eq!(
        outcome(&f, &text_message(r#"{"name":"John","age":null}"#, StopReason::Stop), None),
        StructuredOutcome::Valid(json!({"name": "John"}))
    );
    let nullable = OutputFormat::new(
        "n",
        json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
    );
    assert_eq!(
        outcome(&nullable, &text_message(r#"{"a":null}"#, StopReason::Stop), None),
        StructuredOutcome::Valid(json!({"a": null}))
    );
}

#[test]
fn a_forced_call_is_the_answer_and_its_cut_arguments_are_cut_off() {
    let call = |incomplete: bool| AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "c1".to_owned(),
            name: "person".to_owned(),
            arguments: json!({"name": "John"}),
            thought_signature: None,
            arguments_incomplete: incomplete,
        })],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    assert_eq!(
        outcome(&person(), &call(false), None),
        StructuredOutcome::Valid(json!({"name": "John"}))
    );
    assert_eq!(
        outcome(&person(), &call(true), None),
        StructuredOutcome::CutOff(json!({"name": "John"}))
    );
}

fn text_turn(fragments: &[&str], stop: StopReason) -> ScriptedTurn {
    let mut deltas: Vec<Delta> =
        fragments.iter().map(|f| Delta::Text { key: 0, text: (*f).to_owned() }).collect();
    deltas.push(Delta::Stop(stop));
    deltas.push(Delta::Done);
    ScriptedTurn::deltas(deltas)
}

#[tokio::test]
async fn a_streamed_answer_shows_each_partial_value_and_where_it_changed() {
    let provider = ScriptedProvider::new(
        "acme-api",
        [text_turn(&[r#"{"na"#, r#"me":"Jo"#, r#"hn","age""#, ":4", "2}"], StopReason::Stop)],
    );
    let stream = provider.stream(&model("x"), &ctx(), &with(person()));
    let mut structured = StructuredStream::new(stream, person());
    let mut seen = Vec::new();
    let mut end = None;
    while let Some(event) = structured.next().await {
        match event {
            StructuredEvent::Partial { changed } => {
                seen.push((changed.to_string(), structured.partial().clone()))
            }
            StructuredEvent::Done { outcome, .. } => end = Some(outcome),
        }
    }
    assert_eq!(
        seen,
        vec![
            ("/name".to_owned(), json!({"name": "Jo"})),
            ("/name".to_owned(), json!({"name": "John"})),
            ("/age".to_owned(), json!({"name": "John", "age": 4})),
            ("/age".to_owned(), json!({"name": "John", "age": 42})),
        ]
    );
    assert_eq!(end, Some(StructuredOutcome::Valid(json!({"name": "John", "age": 42}))));
    assert!(structured.next().await.is_none());
}

#[tokio::test]
async fn a_forced_call_streams_its_arguments_and_text_before_it_is_not_the_answer() {
    let deltas = vec![
        Delta::Text { key: 0, text: "{\"pre\":1}".to_owned() },
        Delta::ToolCallStart { key: 1, id: "c".to_owned(), name: String::new(), arguments: None },
        Delta::ToolCallMeta {
            key: 1,
            id: None,
            name: Some("person".to_owned()),
            thought_signature: None,
        },
        Delta::ToolCallArgs { key: 1, fragment: "{\"name\":".to_owned() },
        Delta::ToolCallArgs { key: 1, fragment: "\"Ann\"}".to_owned() },
        Delta::Stop(StopReason::ToolUse),
        Delta::Done,
    ];
    let provider = ScriptedProvider::new("acme-api", [ScriptedTurn::deltas(deltas)]);
    let stream = provider.stream(&model("tooly"), &ctx(), &with(person()));
    let mut structured = StructuredStream::new(stream, person());
    let mut last_partial = None;
    let mut end = None;
    while let Some(event) = structured.next().await {
        match event {
            StructuredEvent::Partial { .. } => last_partial = Some(structured.partial().clone()),
            StructuredEvent::Done { outcome, .. } => end = Some(outcome),
        }
    }
    assert_eq!(last_partial, Some(json!({"name": "Ann"})));
    assert_eq!(end, Some(StructuredOutcome::Valid(json!({"name": "Ann"}))));
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Person {
    name: String,
    age: Option<u32>,
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Draft {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

#[test]
fn a_type_s_format_is_named_after_it_and_strict_when_its_schema_can_be() {
    let f = OutputFormat::for_type::<Person>();
    assert_eq!(f.name, "Person");
    assert!(f.schema.get("$schema").is_none());
    assert_eq!(f.schema["required"], json!(["name"]));
    // schemars gives `u32` the format `uint32`, which strict mode rejects.
    assert!(!f.strict);
    let d = OutputFormat::for_type::<Draft>();
    assert_eq!(d.name, "Draft");
    assert!(d.strict);
}

#[tokio::test]
async fn generate_returns_the_typed_answer_and_sends_the_type_s_format() {
    let provider = ScriptedProvider::new(
        "acme-api",
        [text_turn(&[r#"{"name":"John","age":null}"#], StopReason::Stop)],
    );
    let got = generate::<Person>(&provider, &model("x"), &ctx(), &StreamOptions::default())
        .await
        .unwrap();
    assert_eq!(got.value, Person { name: "John".to_owned(), age: None });
    assert_eq!(got.message.stop_reason, StopReason::Stop);

    let provider =
        ScriptedProvider::new("acme-api", [text_turn(&[r#"{"age":3}"#], StopReason::Stop)]);
    let error = generate::<Person>(&provider, &model("x"), &ctx(), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, StructuredError::Invalid { violations, .. } if violations[0].path == "name"),
        "{error:?}"
    );
}

#[tokio::test]
async fn stream_typed_yields_each_partial_that_deserializes_then_the_result() {
    let provider = ScriptedProvider::new(
        "acme-api",
        [text_turn(&[r#"{"title":"Ru"#, r#"st","tags":["a"#, r#"","b"]}"#], StopReason::Stop)],
    );
    let mut stream =
        stream_typed::<Draft>(&provider, &model("x"), &ctx(), &StreamOptions::default());
    let mut partials = Vec::new();
    let mut end = None;
    while let Some(event) = stream.next().await {
        match event {
            TypedEvent::Partial(d) => partials.push(d),
            TypedEvent::Done(result) => end = Some(result.unwrap().value),
        }
    }
    let titles: Vec<Option<&str>> = partials.iter().map(|d| d.title.as_deref()).collect();
    assert_eq!(titles, vec![Some("Ru"), Some("Rust"), Some("Rust")]);
    assert_eq!(partials.last().unwrap().tags, vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(
        end,
        Some(Draft { title: Some("Rust".to_owned()), tags: vec!["a".to_owned(), "b".to_owned()] })
    );
}

#[test]
fn a_format_round_trips_through_json_and_is_strict_unless_it_says_otherwise() {
    let format = person().with_description("who");
    let text = serde_json::to_value(&format).unwrap();
    assert_eq!(text["name"], json!("person"));
    assert_eq!(text["strict"], json!(true));
    assert_eq!(serde_json::from_value::<OutputFormat>(text).unwrap(), format);
    let read: OutputFormat =
        serde_json::from_value(json!({"name": "n", "schema": {"type": "object"}})).unwrap();
    assert!(read.strict);
    assert_eq!(read.description, None);
}

/// The end of a streamed text answer gives what parsing its text with `serde_json` gives (the
/// oracle: `outcome` on the collected message), whether or not the streamed value is reused:
/// exact objects, and every input where the streamed value differs from a strict parse (the
/// drive-path rule, lone surrogates, numbers out of range, raw control characters, invalid
/// escapes, a top-level array, trailing text, two text blocks).
#[tokio::test]
async fn the_streamed_answer_ends_as_a_strict_parse_of_its_text_would() {
    let loose = OutputFormat::new("any", json!({"type": ["object", "array"]})).with_strict(false);
    let cases: &[&[&str]] = &[
        &[r#"{"name":"Jo"#, r#"hn","age":42}"#],
        &[
            " \n{\"a\":[1,2.5,-0,1e3,{\"b\":null}],\"c\":\"\\u00e9\\ud83d",
            "\\ude00 \\\\ \\\" \\n\"}\n ",
        ],
        &[r#"{"p":"C:\new\file"}"#],
        &[r#"{"a":"A:\tB","b":"C:\\Users\\ola"}"#],
        &[r#"{"s":"\ud800"}"#],
        &[r#"{"s":"\udc00x"}"#],
        &[r#"{"s":"\ud800\n"}"#],
        &[r#"{"n":1e400}"#],
        &["{\"t\":\"raw\ttab\"}"],
        &[r#"{"e":"\q"}"#],
        &[r#"{"u":"\u12G4"}"#],
        &[r#"[1,2]"#],
        &[r#"{"a":1} {"b":2}"#],
        &[r#"{"a":1,"a":"two"}"#],
    ];
    for fragments in cases {
        let provider = ScriptedProvider::new("acme-api", [text_turn(fragments, StopReason::Stop)]);
        let stream = provider.stream(&model("x"), &ctx(), &with(loose.clone()));
        let (streamed, message) = StructuredStream::new(stream, loose.clone()).finish().await;
        let reference = outcome(&loose, &message, None);
        assert_eq!(streamed, reference, "{fragments:?}");
    }
    // Two text blocks: the answer is their concatenation.
    let deltas = vec![
        Delta::Text { key: 0, text: r#"{"a":"#.to_owned() },
        Delta::Thinking { key: 1, text: "hmm".to_owned() },
        Delta::Text { key: 2, text: "1}".to_owned() },
        Delta::Stop(StopReason::Stop),
        Delta::Done,
    ];
    let provider = ScriptedProvider::new("acme-api", [ScriptedTurn::deltas(deltas)]);
    let stream = provider.stream(&model("x"), &ctx(), &with(loose.clone()));
    let (streamed, message) = StructuredStream::new(stream, loose.clone()).finish().await;
    assert_eq!(streamed, StructuredOutcome::Valid(json!({"a": 1})));
    assert_eq!(streamed, outcome(&loose, &message, None));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Random objects serialized by `serde_json`, cut anywhere: the outcome is the object.
    #[test]
    fn a_serialized_object_at_any_fragmentation_ends_valid_and_equal(
        entries in proptest::collection::vec(("[a-z\\\\:\"\n\t\u{e9}\u{1F600}]{0,8}", proptest::prelude::any::<i64>(), "[ -~\n\\\\]{0,24}"), 0..8),
        cuts in proptest::collection::vec(0usize..64, 0..6),
    ) {
        let mut object = serde_json::Map::new();
        for (key, number, text) in entries {
            object.insert(key.clone(), json!({"n": number, "t": text, "l": [number, text.len()]}));
        }
        let original = Value::Object(object);
        let text = serde_json::to_string(&original).unwrap();
        let mut fragments = Vec::new();
        let mut rest = text.as_str();
        for cut in cuts {
            let at = rest.floor_char_boundary(cut.min(rest.len()));
            let (head, tail) = rest.split_at(at);
            fragments.push(head);
            rest = tail;
        }
        fragments.push(rest);
        let loose = OutputFormat::new("any", json!({"type": "object"})).with_strict(false);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (streamed, message) = runtime.block_on(async {
            let provider = ScriptedProvider::new("acme-api", [text_turn(&fragments, StopReason::Stop)]);
            let stream = provider.stream(&model("x"), &ctx(), &with(loose.clone()));
            StructuredStream::new(stream, loose.clone()).finish().await
        });
        proptest::prop_assert_eq!(&streamed, &StructuredOutcome::Valid(original));
        proptest::prop_assert_eq!(streamed, outcome(&loose, &message, None));
    }
}
