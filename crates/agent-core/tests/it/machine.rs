//! The machine alone, under random interleavings of every input: answers in any
//! order, aborts at every point, panics of hooks and tools delivered as
//! failures, late, repeated and unknown tool results, approvals granted,
//! denied and never answered, steering and follow-ups at every point.
//! Some runs ask for a final answer in a format (on every turn or a final turn, with
//! retries), and their responses answer in it, valid or not, as text or as the call
//! named after the format.
//!
//! For every seed: exactly one `Finished`, after `AgentEnd`, and nothing after
//! it; every call gets one start, one end and one result; the transcript passes
//! `check_tool_results` as stored and after the transform of every provider
//! (no two results under one id). And the same run stored and restored (as
//! JSON) before every input yields exactly the events and the structured outcome of
//! the uninterrupted run.

use std::collections::HashMap;
use std::sync::Arc;

use agent_core::*;
use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, Message, StopReason, TextContent, Tool,
    ToolCall,
};
use serde_json::{Value, json};

use crate::model;
use crate::random::Rng;

fn tool(name: &str) -> AgentTool {
    let tool = AgentTool::new(
        Tool {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("never run here")) },
    );
    match name {
        "seq" => tool.with_mode(ExecutionMode::Sequential),
        "shim" => tool.with_prepare_arguments(Ok),
        _ => tool,
    }
}

/// Every tool the environment knows, for binding after a restore.
fn all_tools() -> Vec<AgentTool> {
    ["a", "b", "seq", "shim", "late"].iter().map(|n| tool(n)).collect()
}

/// The world around the machine: it answers commands in a random order, from one seed.
struct World {
    rng: Rng,
    outstanding: Vec<Command>,
    approvals: Vec<String>,
    steps: u32,
    aborted: bool,
    next_id: u64,
}

impl World {
    /// A response; `carries`: its request carried the output format, so it may answer
    /// in it (valid or not, as text or as the call named after the format).
    fn response(&mut self, cancelled: bool, carries: bool) -> Vec<Input> {
        let mut content = Vec::new();
        if self.rng.chance(40) {
            content.push(AssistantContent::Text(TextContent {
                text: "hm".into(),
                text_signature: None,
            }));
        }
        let calls = self.rng.below(4);
        let mut last_id = String::new();
        for _ in 0..calls {
            let name = ["a", "b", "seq", "shim", "late", "missing"][self.rng.below(6) as usize];
            // Repeated ids happen.
            let id = if !last_id.is_empty() && self.rng.chance(15) {
                last_id.clone()
            } else {
                self.next_id += 1;
                format!("c{}", self.next_id)
            };
            last_id = id.clone();
            let arguments = match self.rng.below(5) {
                0 => json!({"n": "not a number"}),
                _ => json!({"n": self.rng.below(10)}),
            };
            content.push(AssistantContent::ToolCall(ToolCall {
                id,
                name: name.into(),
                arguments,
                thought_signature: None,
                arguments_incomplete: self.rng.chance(10),
            }));
        }
        if carries {
            let text = |text: &str| {
                AssistantContent::Text(TextContent { text: text.into(), text_signature: None })
            };
            match self.rng.below(6) {
                0 => content = vec![text(r#"{"n": 3}"#)],
                1 => content = vec![text(r#"{"n": "three"}"#)],
                2 => content = vec![text("not JSON")],
                3 | 4 => {
                    self.next_id += 1;
                    let arguments =
                        if self.rng.chance(70) { json!({"n": 4}) } else { json!({"m": 4}) };
                    let at = self.rng.below(content.len() as u64 + 1) as usize;
                    content.insert(
                        at,
                        AssistantContent::ToolCall(ToolCall {
                            id: format!("c{}", self.next_id),
                            name: "answer".into(),
                            arguments,
                            thought_signature: None,
                            arguments_incomplete: self.rng.chance(5),
                        }),
                    );
                }
                _ => {}
            }
        }
        let calls = content.iter().filter(|c| matches!(c, AssistantContent::ToolCall(_))).count();
        let stop_reason = if cancelled {
            StopReason::Aborted
        } else {
            match self.rng.below(20) {
                0 => StopReason::Length,
                1 => StopReason::Error,
                2 => StopReason::Aborted,
                3 | 4 => StopReason::Stop,
                _ if calls > 0 => StopReason::ToolUse,
                _ => StopReason::Stop,
            }
        };
        let message = AssistantMessage {
            content,
            api: "scripted".into(),
            provider: "scripted".into(),
            model: "scripted-1".into(),
            stop_reason,
            error_message: matches!(stop_reason, StopReason::Error | StopReason::Aborted)
                .then(|| "boom".to_owned()),
            ..AssistantMessage::default()
        };
        let mut inputs = vec![Input::ResponseStarted(AssistantMessage::default())];
        inputs.push(Input::ResponseEvent(AssistantEvent::TextDelta {
            content_index: 0,
            delta: "hm".into(),
        }));
        inputs.push(Input::ResponseEnded(message));
        inputs
    }

    /// The answer to a command, or `None` to leave it outstanding a while.
    fn answer(&mut self, command: &Command, cancelled: bool, carries: bool) -> Vec<Input> {
        let r = self.rng.below(100);
        match command {
            Command::PrepareTurn => vec![Input::TurnPrepared(match r {
                0..=4 => Answer::Panicked("prepare panicked".into()),
                5..=9 if cancelled => Answer::Abandoned,
                10..=19 => Answer::Done(Some(TurnChange {
                    system_prompt: Some(Some(format!("prompt {r}"))),
                    ..TurnChange::default()
                })),
                20..=22 => Answer::Done(Some(TurnChange {
                    tools: Some(vec![tool("a"), tool("a")]),
                    ..TurnChange::default()
                })),
                _ => Answer::Done(None),
            })],
            Command::Request => match r {
                0..=2 => vec![Input::RequestFailed(RequestFailure::HookPanicked {
                    hook: "transform_context".into(),
                    message: "t".into(),
                })],
                3..=4 => vec![Input::RequestFailed(RequestFailure::HookFailed {
                    hook: "api_key".into(),
                    message: "no key".into(),
                })],
                5..=6 => vec![Input::RequestFailed(RequestFailure::ProviderPanicked("p".into()))],
                7 if cancelled => vec![Input::RequestFailed(RequestFailure::Abandoned)],
                _ => self.response(cancelled, carries),
            },
            Command::ResolveTool { call } => {
                let answer = match r {
                    0..=9 => Answer::Panicked("resolver panicked".into()),
                    10..=19 => Answer::Done(Err(ToolError("resolver failed".into()))),
                    20..=59 => Answer::Done(Ok(None)),
                    60..=69 => Answer::Done(Ok(Some(tool("other-name")))),
                    _ if cancelled && r > 90 => Answer::Abandoned,
                    // Only `late` is deferred in this world.
                    _ => Answer::Done(Ok(Some(tool("late")))),
                };
                vec![Input::ToolResolved { call: *call, answer }]
            }
            Command::PrepareArguments { call, .. } => {
                let answer = match r {
                    0..=9 => Answer::Panicked("shim panicked".into()),
                    10..=19 => Answer::Done(Err(ToolError("shim refused".into()))),
                    _ => Answer::Done(Ok(json!({"n": 1}))),
                };
                vec![Input::ArgumentsPrepared { call: *call, answer }]
            }
            Command::BeforeToolCall { call, .. } => {
                let answer = match r {
                    0..=7 => Answer::Panicked("before panicked".into()),
                    8..=15 => Answer::Done(BeforeToolCall::Block(Some("no".into()))),
                    16..=35 => Answer::Done(BeforeToolCall::Ask { reason: "sure?".into() }),
                    36..=38 if cancelled => Answer::Abandoned,
                    _ => Answer::Done(BeforeToolCall::Allow),
                };
                vec![Input::BeforeToolCall { call: *call, answer }]
            }
            Command::Execute { call, .. } => {
                let answer = match r {
                    0..=9 => Answer::Panicked("tool panicked".into()),
                    10..=24 => Answer::Done(Err(ToolError("tool failed".into()))),
                    25..=34 if cancelled => Answer::Abandoned,
                    35..=39 => Answer::Done(Ok(ToolOutput::text("bye").terminating())),
                    _ => Answer::Done(Ok(ToolOutput::text(format!("out {r}")))),
                };
                let mut inputs = vec![Input::ToolFinished { call: *call, answer: answer.clone() }];
                // A late duplicate of the same result.
                if self.rng.chance(10) {
                    inputs.push(Input::ToolFinished { call: *call, answer });
                }
                inputs
            }
            Command::AfterToolCall { call, .. } => {
                let answer = match r {
                    0..=7 => Answer::Panicked("after panicked".into()),
                    8..=15 => Answer::Done(Some(AfterToolCall {
                        content: Some(vec![llm_core::UserContent::text("overridden")]),
                        stop_after_batch: r.is_multiple_of(2),
                        ..AfterToolCall::default()
                    })),
                    16..=18 if cancelled => Answer::Abandoned,
                    _ => Answer::Done(None),
                };
                vec![Input::AfterToolCall { call: *call, answer }]
            }
            Command::ShouldStopAfterTurn => vec![Input::StopAfterTurn(match r {
                0..=3 => Answer::Panicked("stop panicked".into()),
                4..=9 => Answer::Done(true),
                _ => Answer::Done(false),
            })],
            _ => Vec::new(),
        }
    }

    /// The next input: an answer to an outstanding command, or something from
    /// outside (steering, an abort, an approval, junk); `None` when the world
    /// has nothing more to say.
    fn next_input(&mut self, machine: &AgentMachine) -> Option<Vec<Input>> {
        self.steps += 1;
        let cancelled = machine.is_cancelled();
        let carries = machine.request_carries_output();
        // Eventually the world gives up on everything and aborts.
        if !self.aborted && (self.steps > 120 || self.rng.chance(2)) {
            self.aborted = true;
            return Some(vec![Input::Abort]);
        }
        match self.rng.below(12) {
            0 => return Some(vec![Input::Steer(Message::user(format!("steer {}", self.steps)))]),
            1 => {
                return Some(vec![Input::FollowUp(Message::user(format!(
                    "follow {}",
                    self.steps
                )))]);
            }
            2 if !self.approvals.is_empty() => {
                let i = self.rng.below(self.approvals.len() as u64) as usize;
                let id = self.approvals.remove(i);
                let decision = if self.rng.chance(50) {
                    Approval::Approve
                } else {
                    Approval::Deny { reason: Some("no".into()) }
                };
                // Sometimes twice.
                let mut inputs =
                    vec![Input::Approval { tool_call_id: id.clone(), decision: decision.clone() }];
                if self.rng.chance(10) {
                    inputs.push(Input::Approval { tool_call_id: id, decision });
                }
                return Some(inputs);
            }
            3 => {
                // Junk: a result for a call that does not exist.
                let call = CallRef { message: 999, content: 0, index: self.rng.below(3) as usize };
                return Some(vec![Input::ToolFinished {
                    call,
                    answer: Answer::Done(Ok(ToolOutput::text("junk"))),
                }]);
            }
            _ => {}
        }
        if self.outstanding.is_empty() {
            // Waiting for a person who may never answer: abort in the end.
            if !self.aborted {
                self.aborted = true;
                return Some(vec![Input::Abort]);
            }
            // The person never answers: the abort alone must end the run.
            return None;
        }
        let i = self.rng.below(self.outstanding.len() as u64) as usize;
        let command = self.outstanding.remove(i);
        Some(self.answer(&command, cancelled, carries))
    }
}

/// Runs one seed; with `restore`, the machine is stored and restored before every input.
fn run(seed: u64, restore: bool) -> (Vec<AgentEvent>, AgentMachine) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let settings = MachineSettings {
        tool_execution: if rng.chance(20) {
            ExecutionMode::Sequential
        } else {
            ExecutionMode::Parallel
        },
        max_concurrency: if rng.chance(30) { Some(1 + rng.below(2) as usize) } else { None },
        max_turns: Some(1 + rng.below(5) as u32),
        steering_mode: if rng.chance(50) { QueueMode::All } else { QueueMode::OneAtATime },
        follow_up_mode: if rng.chance(50) { QueueMode::All } else { QueueMode::OneAtATime },
    };
    let context = AgentContext {
        system_prompt: None,
        messages: Vec::new(),
        tools: vec![tool("a"), tool("b"), tool("seq"), tool("shim")],
    };
    let mut machine = AgentMachine::new(settings, context, Arc::new(model()), Arc::default());
    if rng.chance(35) {
        let turn = if rng.chance(50) { OutputTurn::Every } else { OutputTurn::Final };
        let format = llm_core::output::OutputFormat::new("answer", answer_schema());
        let output = AgentOutput { format, turn, retries: rng.below(3) as u32 };
        machine = machine.with_output(output);
    }
    let mut world = World {
        rng,
        outstanding: Vec::new(),
        approvals: Vec::new(),
        steps: 0,
        aborted: false,
        next_id: 0,
    };
    let mut events = Vec::new();
    let mut finished = 0;
    let mut out = Vec::new();
    let mut inputs = vec![Input::Start(vec![Message::user("go")])];
    let mut now = 1_000;
    loop {
        for input in inputs {
            if restore {
                let stored = machine.to_json().expect("stores");
                machine = AgentMachine::from_json(&stored).expect("restores");
                machine.bind_tools(&all_tools());
            }
            now += 1;
            let abort = matches!(input, Input::Abort);
            machine.handle(input, now, &mut out);
            assert!(
                !abort || machine.is_cancelled() || finished > 0,
                "seed {seed}: abort not kept"
            );
            for output in out.drain(..) {
                assert_eq!(finished, 0, "seed {seed}: output after Finished: {output:?}");
                match output {
                    Output::Event(event) => {
                        if let AgentEvent::ApprovalRequested { tool_call_id, .. } = &event {
                            world.approvals.push(tool_call_id.clone());
                        }
                        events.push(event);
                    }
                    Output::Command(command) => world.outstanding.push(command),
                    Output::Finished => finished += 1,
                    _ => {}
                }
            }
        }
        if finished > 0 {
            break;
        }
        // What a driver restoring this state would carry out again is exactly what the
        // world still owes the machine (until an abort lets the machine drop its waits).
        if !world.aborted && !machine.is_cancelled() {
            let mut owed: Vec<String> =
                world.outstanding.iter().map(|c| format!("{c:?}")).collect();
            let mut listed: Vec<String> =
                machine.outstanding().iter().map(|c| format!("{c:?}")).collect();
            owed.sort();
            listed.sort();
            assert_eq!(listed, owed, "seed {seed}: outstanding commands");
        }
        match world.next_input(&machine) {
            Some(next) => inputs = next,
            None => panic!("seed {seed}: the world is out of inputs and the run did not end"),
        }
        assert!(world.steps < 10_000, "seed {seed}: no end");
    }
    (events, machine)
}

fn answer_schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
}

fn check(seed: u64, events: &[AgentEvent], machine: &AgentMachine) {
    // A run with an output format has an outcome, and a valid one is what the
    // schema says (read here without the validator under test).
    if machine.output().is_some() {
        match machine.output_outcome() {
            Some(llm_core::output::StructuredOutcome::Valid(value)) => {
                assert!(value["n"].is_i64(), "seed {seed}: {value}");
                // An answer that ended the run in failure is not valid.
                let failed =
                    [EndReason::Aborted, EndReason::Error, EndReason::Length, EndReason::Failed];
                let reason = machine.reason();
                assert!(reason.is_some_and(|r| !failed.contains(&r)), "seed {seed}: {reason:?}");
            }
            Some(_) => {}
            None => panic!("seed {seed}: no outcome"),
        }
    } else {
        assert_eq!(machine.output_outcome(), None, "seed {seed}");
    }
    let ends = events.iter().filter(|e| matches!(e, AgentEvent::AgentEnd { .. })).count();
    assert_eq!(ends, 1, "seed {seed}");
    assert!(matches!(events.last(), Some(AgentEvent::AgentEnd { .. })), "seed {seed}");
    let messages = &machine.context().messages;
    assert_eq!(llm_core::transform::check_tool_results(messages), Vec::new(), "seed {seed}");
    // Every call: one start, one end, one result.
    let mut starts: HashMap<&str, i32> = HashMap::new();
    let mut ended: HashMap<&str, i32> = HashMap::new();
    for e in events {
        match e {
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                *starts.entry(tool_call_id).or_default() += 1;
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                assert_eq!(
                    starts.get(tool_call_id.as_str()),
                    Some(&1),
                    "seed {seed}: end before start"
                );
                *ended.entry(tool_call_id).or_default() += 1;
            }
            _ => {}
        }
    }
    let calls: Vec<&ToolCall> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls()),
            _ => None,
        })
        .flatten()
        .collect();
    for call in &calls {
        assert_eq!(starts.get(call.id.as_str()), Some(&1), "seed {seed}: {}", call.id);
        assert_eq!(ended.get(call.id.as_str()), Some(&1), "seed {seed}: {}", call.id);
    }
    assert_eq!(starts.len(), calls.len(), "seed {seed}");
    // The transcript is one every provider accepts.
    let rules = [None, Some(IdRules::ALNUM_DASH_64), Some(IdRules::MISTRAL_9)];
    for rule in rules {
        let sent = transform_messages(messages, &model(), rule.as_ref());
        assert_eq!(llm_core::transform::check_tool_results(&sent), Vec::new(), "seed {seed}");
        let mut ids: Vec<&str> = sent
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult(r) => Some(r.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "seed {seed}: two results under one id");
    }
}

#[test]
fn random_interleavings_keep_every_invariant_and_a_restored_run_goes_on_identically() {
    let seeds: u64 =
        std::env::var("MACHINE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let mut approvals = 0;
    let mut outcomes: HashMap<&'static str, usize> = HashMap::new();
    for seed in 0..seeds {
        let (events, machine) = run(seed, false);
        check(seed, &events, &machine);
        approvals +=
            events.iter().filter(|e| matches!(e, AgentEvent::ApprovalRequested { .. })).count();
        let (restored, restored_machine) = run(seed, true);
        assert_eq!(events, restored, "seed {seed}: a restored run went another way");
        let outcome = machine.output_outcome();
        assert_eq!(outcome, restored_machine.output_outcome(), "seed {seed}");
        let kind = match outcome {
            Some(llm_core::output::StructuredOutcome::Valid(_)) => "valid",
            Some(llm_core::output::StructuredOutcome::Invalid { value: Some(_), .. }) => "invalid",
            Some(_) => "other",
            None => "none",
        };
        *outcomes.entry(kind).or_default() += 1;
    }
    // The world did exercise approvals, and answers valid and invalid.
    assert!(approvals > seeds as usize / 10, "{approvals}");
    for kind in ["valid", "invalid", "other", "none"] {
        assert!(outcomes.get(kind).copied().unwrap_or(0) > seeds as usize / 200, "{outcomes:?}");
    }
}

#[test]
fn inputs_that_answer_nothing_change_nothing() {
    let mut machine = AgentMachine::new(
        MachineSettings::default(),
        AgentContext::default(),
        Arc::new(model()),
        Arc::default(),
    );
    let mut out = Vec::new();
    let call = CallRef { message: 0, content: 0, index: 0 };
    for input in [
        Input::ToolFinished { call, answer: Answer::Done(Ok(ToolOutput::text("x"))) },
        Input::TurnPrepared(Answer::Done(None)),
        Input::StopAfterTurn(Answer::Done(true)),
        Input::ResponseEnded(AssistantMessage::default()),
        Input::Approval { tool_call_id: "x".into(), decision: Approval::Approve },
    ] {
        machine.handle(input, 1, &mut out);
    }
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(machine.reason(), None);
    let _ = Value::Null;
}
