//! Which tools the model sees, and in what order (OpenClaw's tool planning).
//!
//! A [`ToolDescriptor`] carries a tool's definition plus who owns it, what
//! executes it and when it is available. [`build_tool_plan`] evaluates every
//! availability expression against an explicit [`AvailabilityEnv`] (the planner
//! never reads the process environment), rejects contract violations, and
//! returns visible and hidden tools in a deterministic order (`sort_key`, else
//! name), so identical inputs always give identical request bytes.
//! [`to_protocol_descriptors`] turns the plan into the `llm_core::Tool` list
//! the providers consume.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::{Arc, LazyLock};

use icu_collator::options::CollatorOptions;
use icu_collator::{Collator, CollatorBorrowed};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who provides a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Owner {
    /// Built in.
    Core,
    /// A plugin.
    #[serde(rename_all = "camelCase")]
    Plugin {
        /// Plugin id.
        plugin_id: String,
    },
    /// A channel integration.
    #[serde(rename_all = "camelCase")]
    Channel {
        /// Channel id.
        channel_id: String,
        /// Plugin id, when a plugin provides the channel.
        plugin_id: Option<String>,
    },
    /// An MCP server.
    #[serde(rename_all = "camelCase")]
    Mcp {
        /// Server id.
        server_id: String,
    },
}

/// What executes a tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ExecutorRef {
    /// A built-in executor.
    #[serde(rename_all = "camelCase")]
    Core {
        /// Executor id.
        executor_id: String,
    },
    /// A plugin's tool.
    #[serde(rename_all = "camelCase")]
    Plugin {
        /// Plugin id.
        plugin_id: String,
        /// Tool name inside the plugin.
        tool_name: String,
    },
    /// A channel action.
    #[serde(rename_all = "camelCase")]
    Channel {
        /// Channel id.
        channel_id: String,
        /// Action id.
        action_id: String,
    },
    /// An MCP tool.
    #[serde(rename_all = "camelCase")]
    Mcp {
        /// Server id.
        server_id: String,
        /// Tool name on the server.
        tool_name: String,
    },
}

/// How a `config` signal checks its value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigCheck {
    /// Any non-null value.
    #[default]
    Exists,
    /// A non-blank string, non-empty array or object; other scalars pass.
    NonEmpty,
    /// Delegated to [`AvailabilityEnv::is_config_value_available`].
    Available,
}

/// One availability condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Signal {
    /// Always available.
    Always,
    /// Needs credentials for a provider.
    #[serde(rename_all = "camelCase")]
    Auth {
        /// Provider id.
        provider_id: String,
    },
    /// Needs a config value.
    Config {
        /// Path into the config object.
        path: Vec<String>,
        /// How to check the value.
        #[serde(default)]
        check: ConfigCheck,
    },
    /// Needs a non-blank environment value.
    Env {
        /// Variable name.
        name: String,
    },
    /// Needs a plugin to be enabled.
    #[serde(rename_all = "camelCase")]
    PluginEnabled {
        /// Plugin id.
        plugin_id: String,
    },
    /// Needs a context value (present, or equal to `equals`).
    Context {
        /// Key.
        key: String,
        /// Required value; `Some(Value::Null)` requires an explicit null.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "explicit_value"
        )]
        equals: Option<Value>,
    },
}

fn explicit_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// An availability expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Availability {
    /// One signal.
    Signal(Signal),
    /// Every child must pass.
    AllOf(Vec<Availability>),
    /// At least one child must pass.
    AnyOf(Vec<Availability>),
    /// A shape the planner does not understand (unknown kind, missing field):
    /// always hides the tool with an `unsupported-signal` diagnostic.
    Unsupported {
        /// Why.
        message: String,
    },
}

impl Availability {
    /// Reads an expression from JSON leniently: a malformed or unknown shape
    /// becomes [`Availability::Unsupported`] instead of an error.
    pub fn from_json(value: &Value) -> Availability {
        let Some(obj) = value.as_object() else {
            return Availability::Unsupported {
                message: "Unsupported availability expression".into(),
            };
        };
        for (key, group) in [("allOf", true), ("anyOf", false)] {
            if let Some(children) = obj.get(key) {
                let children: Vec<Availability> = match children.as_array() {
                    Some(a) => a.iter().map(Availability::from_json).collect(),
                    None => Vec::new(),
                };
                return if group {
                    Availability::AllOf(children)
                } else {
                    Availability::AnyOf(children)
                };
            }
        }
        let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
            return Availability::Unsupported {
                message: "Unsupported availability expression".into(),
            };
        };
        let required = match kind {
            "auth" => Some("providerId"),
            "config" => Some("path"),
            "env" => Some("name"),
            "plugin-enabled" => Some("pluginId"),
            "context" => Some("key"),
            "always" => None,
            _ => {
                return Availability::Unsupported {
                    message: "Unsupported availability signal".into(),
                };
            }
        };
        if let Some(field) = required
            && obj.get(field).is_none_or(Value::is_null)
        {
            return Availability::Unsupported {
                message: format!("Malformed {kind} signal: missing {field}"),
            };
        }
        match serde_json::from_value::<Signal>(value.clone()) {
            Ok(signal) => Availability::Signal(signal),
            Err(e) => {
                Availability::Unsupported { message: format!("Malformed {kind} signal: {e}") }
            }
        }
    }
}

/// A tool as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescriptor {
    /// Unique name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the result, if declared.
    pub output_schema: Option<Value>,
    /// Who provides it.
    pub owner: Owner,
    /// What executes it (required for visible tools).
    pub executor: Option<ExecutorRef>,
    /// When it is available (`None`: always).
    pub availability: Option<Availability>,
    /// Free-form annotations.
    pub annotations: Option<Value>,
    /// Sort key (defaults to the name).
    pub sort_key: Option<String>,
}

impl ToolDescriptor {
    /// A core tool, always available, with a core executor of the same name.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        let name = name.into();
        ToolDescriptor {
            executor: Some(ExecutorRef::Core { executor_id: name.clone() }),
            name,
            title: None,
            description: description.into(),
            input_schema,
            output_schema: None,
            owner: Owner::Core,
            availability: None,
            annotations: None,
            sort_key: None,
        }
    }
}

/// Decides `config` signals with `check: available`: `(value, path) -> available`.
pub type ConfigAvailability = Arc<dyn Fn(&Value, &[String]) -> bool + Send + Sync>;

/// Everything availability is evaluated against. Build it explicitly; the
/// planner reads nothing else.
#[derive(Clone, Default)]
pub struct AvailabilityEnv {
    /// Providers with credentials.
    pub auth_provider_ids: BTreeSet<String>,
    /// The configuration object.
    pub config: Value,
    /// Callback for `check: available` config signals (absent: hidden).
    pub is_config_value_available: Option<ConfigAvailability>,
    /// Environment values.
    pub env: BTreeMap<String, String>,
    /// Enabled plugins.
    pub enabled_plugin_ids: BTreeSet<String>,
    /// Context values.
    pub values: BTreeMap<String, Value>,
}

impl fmt::Debug for AvailabilityEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values may be secrets: print names only.
        f.debug_struct("AvailabilityEnv")
            .field("auth_provider_ids", &self.auth_provider_ids)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("enabled_plugin_ids", &self.enabled_plugin_ids)
            .field("values", &self.values.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Why a tool is hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// `auth-missing`
    AuthMissing,
    /// `config-missing`
    ConfigMissing,
    /// `context-mismatch`
    ContextMismatch,
    /// `env-missing`
    EnvMissing,
    /// `plugin-disabled`
    PluginDisabled,
    /// `unsupported-signal`
    UnsupportedSignal,
}

impl Reason {
    /// The OpenClaw code.
    pub fn code(self) -> &'static str {
        match self {
            Reason::AuthMissing => "auth-missing",
            Reason::ConfigMissing => "config-missing",
            Reason::ContextMismatch => "context-mismatch",
            Reason::EnvMissing => "env-missing",
            Reason::PluginDisabled => "plugin-disabled",
            Reason::UnsupportedSignal => "unsupported-signal",
        }
    }
}

/// One reason a tool is hidden.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// The reason code.
    pub reason: Reason,
    /// The failing signal, when there is one.
    pub signal: Option<Signal>,
    /// Human-readable message.
    pub message: String,
}

fn diag(reason: Reason, signal: Option<&Signal>, message: String) -> Diagnostic {
    Diagnostic { reason, signal: signal.cloned(), message }
}

fn lookup<'a>(config: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = config;
    for key in path {
        cur = cur.as_object()?.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn evaluate_signal(signal: &Signal, env: &AvailabilityEnv) -> Option<Diagnostic> {
    match signal {
        Signal::Always => None,
        Signal::Auth { provider_id } => (!env.auth_provider_ids.contains(provider_id)).then(|| {
            diag(Reason::AuthMissing, Some(signal), format!("Missing auth provider: {provider_id}"))
        }),
        Signal::Config { path, check } => {
            let ok = match lookup(&env.config, path) {
                None => false,
                Some(v) => match check {
                    ConfigCheck::Exists => true,
                    ConfigCheck::NonEmpty => match v {
                        Value::String(s) => !s.trim().is_empty(),
                        Value::Array(a) => !a.is_empty(),
                        Value::Object(o) => !o.is_empty(),
                        _ => true,
                    },
                    ConfigCheck::Available => {
                        env.is_config_value_available.as_ref().is_some_and(|f| f(v, path))
                    }
                },
            };
            (!ok).then(|| {
                diag(
                    Reason::ConfigMissing,
                    Some(signal),
                    format!("Missing config path: {}", path.join(".")),
                )
            })
        }
        Signal::Env { name } => {
            let ok = env.env.get(name).is_some_and(|v| !v.trim().is_empty());
            (!ok).then(|| {
                diag(Reason::EnvMissing, Some(signal), format!("Missing environment value: {name}"))
            })
        }
        Signal::PluginEnabled { plugin_id } => {
            (!env.enabled_plugin_ids.contains(plugin_id)).then(|| {
                diag(
                    Reason::PluginDisabled,
                    Some(signal),
                    format!("Plugin is not enabled: {plugin_id}"),
                )
            })
        }
        Signal::Context { key, equals } => match (env.values.get(key), equals) {
            (None, None) => Some(diag(
                Reason::ContextMismatch,
                Some(signal),
                format!("Missing context value: {key}"),
            )),
            (Some(_), None) => None,
            (Some(v), Some(want)) if strictly_equal(v, want) => None,
            (_, Some(_)) => Some(diag(
                Reason::ContextMismatch,
                Some(signal),
                format!("Context value did not match: {key}"),
            )),
        },
    }
}

/// JavaScript's `===` on the primitives a context holds: numbers compare as
/// numbers (`1` and `1.0`, `0` and `-0.0` are equal), anything else as JSON.
fn strictly_equal(value: &Value, want: &Value) -> bool {
    match (value, want) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => value == want,
    }
}

fn evaluate_into(expr: &Availability, env: &AvailabilityEnv, out: &mut Vec<Diagnostic>) {
    match expr {
        Availability::Signal(s) => out.extend(evaluate_signal(s, env)),
        Availability::Unsupported { message } => {
            out.push(diag(Reason::UnsupportedSignal, None, message.clone()))
        }
        Availability::AllOf(children) => {
            if children.is_empty() {
                out.push(diag(
                    Reason::UnsupportedSignal,
                    None,
                    "Empty availability allOf group".into(),
                ));
            }
            for c in children {
                evaluate_into(c, env, out);
            }
        }
        Availability::AnyOf(children) => {
            if children.is_empty() {
                out.push(diag(
                    Reason::UnsupportedSignal,
                    None,
                    "Empty availability anyOf group".into(),
                ));
                return;
            }
            let per_child: Vec<Vec<Diagnostic>> = children
                .iter()
                .map(|c| {
                    let mut d = Vec::new();
                    evaluate_into(c, env, &mut d);
                    d
                })
                .collect();
            if per_child.iter().any(Vec::is_empty) {
                // A passing branch still leaves malformed siblings visible as errors.
                out.extend(
                    per_child
                        .into_iter()
                        .flatten()
                        .filter(|d| d.reason == Reason::UnsupportedSignal),
                );
            } else {
                out.extend(per_child.into_iter().flatten());
            }
        }
    }
}

/// Every diagnostic of `expr` (`None` = always available), in expression order.
/// Empty means available.
pub fn evaluate_availability(
    expr: Option<&Availability>,
    env: &AvailabilityEnv,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(expr) = expr {
        evaluate_into(expr, env, &mut out);
    }
    out
}

/// A contract violation in the descriptor list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Two descriptors share a name (even if one is hidden).
    #[error("Duplicate tool descriptor name: {name}")]
    DuplicateToolName {
        /// The name.
        name: String,
    },
    /// A visible tool has nothing to execute it.
    #[error("Visible tool descriptor has no executor ref: {name}")]
    MissingExecutor {
        /// The name.
        name: String,
    },
}

impl PlanError {
    /// The OpenClaw error code.
    pub fn code(&self) -> &'static str {
        match self {
            PlanError::DuplicateToolName { .. } => "duplicate-tool-name",
            PlanError::MissingExecutor { .. } => "missing-executor",
        }
    }
}

/// A visible tool with its executor.
#[derive(Debug, Clone, PartialEq)]
pub struct VisibleTool<'a> {
    /// The descriptor.
    pub descriptor: &'a ToolDescriptor,
    /// Its executor.
    pub executor: &'a ExecutorRef,
}

/// A hidden tool with the reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct HiddenTool<'a> {
    /// The descriptor.
    pub descriptor: &'a ToolDescriptor,
    /// Why it is hidden, in expression order.
    pub diagnostics: Vec<Diagnostic>,
}

/// The planner's output, borrowing the descriptors; both lists in plan order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolPlan<'a> {
    /// Tools the model sees.
    pub visible: Vec<VisibleTool<'a>>,
    /// Tools it does not, with diagnostics.
    pub hidden: Vec<HiddenTool<'a>>,
}

/// Plan order: `sort_key` (else name), ties by name, both by ICU root collation
/// (Unicode Collation Algorithm with CLDR root data, tertiary strength), the
/// collation JavaScript `localeCompare` uses in OpenClaw. So punctuation sorts
/// before digits and digits before letters (`web_search` < `web-fetch`,
/// `a_b` < `a1b`), and lowercase before uppercase (`read` < `Read`). Strings the
/// collation finds equal fall back to code-point order, so the order never
/// depends on the input order.
pub fn compare_descriptors(a: &ToolDescriptor, b: &ToolDescriptor) -> Ordering {
    let form = KeyForm::for_all([a, b]);
    SortKey::of(a, form).cmp(&SortKey::of(b, form))
}

/// Which collation keys a set of descriptors is sorted by. Keys of the two
/// forms do not compare with each other, so one form serves a whole sort.
#[derive(Clone, Copy)]
enum KeyForm {
    /// Every key and name is printable ASCII: [`ascii_collation_key`].
    Ascii,
    /// ICU sort keys ([`collation_key`]).
    Icu,
}

impl KeyForm {
    fn for_all<'a>(descriptors: impl IntoIterator<Item = &'a ToolDescriptor>) -> Self {
        let all_ascii = descriptors.into_iter().all(|d| {
            is_printable_ascii(&d.name) && d.sort_key.as_deref().is_none_or(is_printable_ascii)
        });
        if all_ascii { KeyForm::Ascii } else { KeyForm::Icu }
    }

    fn key(self, s: &str) -> Vec<u8> {
        match self {
            KeyForm::Ascii => ascii_collation_key(s),
            KeyForm::Icu => collation_key(s),
        }
    }
}

/// The precomputed collation keys of a descriptor (computed once, not per comparison).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct SortKey<'a> {
    key_collated: Vec<u8>,
    name_collated: Vec<u8>,
    key: &'a str,
    name: &'a str,
}

impl<'a> SortKey<'a> {
    fn of(d: &'a ToolDescriptor, form: KeyForm) -> Self {
        let name_collated = form.key(&d.name);
        let (key, key_collated) = match d.sort_key.as_deref() {
            Some(key) => (key, form.key(key)),
            None => (d.name.as_str(), name_collated.clone()),
        };
        SortKey { key_collated, name_collated, key, name: &d.name }
    }
}

/// The root collator, built once from the crate's compiled CLDR data.
static ROOT_COLLATOR: LazyLock<Option<CollatorBorrowed<'static>>> =
    LazyLock::new(|| Collator::try_new(Default::default(), CollatorOptions::default()).ok());

/// The UCA sort key of `s`: comparing keys bytewise is comparing the strings.
pub fn collation_key(s: &str) -> Vec<u8> {
    let mut key = Vec::new();
    if let Some(collator) = ROOT_COLLATOR.as_ref() {
        // Writing into a `Vec` cannot fail.
        let _ = collator.write_sort_key_to(s, &mut key);
    }
    key
}

fn is_printable_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

/// For each printable ASCII byte (index `b - 0x20`): its rank among the
/// primary weights and its rank among the tertiary weights of its primary.
/// Derived from the root collator itself, so it cannot drift from ICU data.
static ASCII_WEIGHTS: LazyLock<[(u8, u8); 95]> = LazyLock::new(ascii_weights);

fn ascii_weights() -> [(u8, u8); 95] {
    let mut weights = [(0u8, 0u8); 95];
    let (Some(tertiary), Ok(primary)) = (
        ROOT_COLLATOR.as_ref(),
        Collator::try_new(Default::default(), {
            let mut options = CollatorOptions::default();
            options.strength = Some(icu_collator::options::Strength::Primary);
            options
        }),
    ) else {
        return weights;
    };
    let mut chars: Vec<(u8, String)> =
        (0x20u8..=0x7e).map(|b| (b, char::from(b).to_string())).collect();
    chars.sort_by(|(a, sa), (b, sb)| tertiary.compare(sa, sb).then(a.cmp(b)));
    let (mut primary_rank, mut tertiary_rank) = (0u8, 0u8);
    let mut previous: Option<&str> = None;
    for (byte, c) in &chars {
        match previous {
            Some(p) if primary.compare(p, c) == Ordering::Equal => {
                if tertiary.compare(p, c) != Ordering::Equal {
                    tertiary_rank += 1;
                }
            }
            _ => {
                primary_rank += 1;
                tertiary_rank = 1;
            }
        }
        if let Some(w) = weights.get_mut(usize::from(byte - 0x20)) {
            *w = (primary_rank, tertiary_rank);
        }
        previous = Some(c);
    }
    weights
}

/// A collation key for printable ASCII that orders exactly like
/// [`collation_key`] and costs a table look-up per byte: in CLDR root every
/// printable ASCII character is one collation element with a non-zero primary
/// weight and the common secondary weight, and none starts a contraction, so
/// the UCA order is the primary weights in sequence, then the tertiary ones
/// (the secondary level only repeats the length). Tests compare it with ICU.
/// Bytes outside printable ASCII are not expected (callers check).
fn ascii_collation_key(s: &str) -> Vec<u8> {
    let weights = &*ASCII_WEIGHTS;
    let weight = |b: u8| weights.get(usize::from(b.wrapping_sub(0x20))).copied().unwrap_or((0, 0));
    let mut key = Vec::with_capacity(2 * s.len() + 1);
    key.extend(s.bytes().map(|b| weight(b).0));
    key.push(0);
    key.extend(s.bytes().map(|b| weight(b).1));
    key
}

/// Builds the plan (OpenClaw's order). Linear in the descriptors plus the sort.
pub fn build_tool_plan<'a>(
    descriptors: &'a [ToolDescriptor],
    env: &AvailabilityEnv,
) -> Result<ToolPlan<'a>, PlanError> {
    let form = KeyForm::for_all(descriptors);
    let mut sorted: Vec<(SortKey<'a>, &'a ToolDescriptor)> =
        descriptors.iter().map(|d| (SortKey::of(d, form), d)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut seen = HashSet::with_capacity(sorted.len());
    for (_, d) in &sorted {
        if !seen.insert(d.name.as_str()) {
            return Err(PlanError::DuplicateToolName { name: d.name.clone() });
        }
    }
    let mut plan = ToolPlan::default();
    for (_, d) in sorted {
        let diagnostics = evaluate_availability(d.availability.as_ref(), env);
        if !diagnostics.is_empty() {
            plan.hidden.push(HiddenTool { descriptor: d, diagnostics });
            continue;
        }
        let Some(executor) = d.executor.as_ref() else {
            return Err(PlanError::MissingExecutor { name: d.name.clone() });
        };
        plan.visible.push(VisibleTool { descriptor: d, executor });
    }
    Ok(plan)
}

/// The provider-facing tool list, in plan order (owner, executor,
/// availability, annotations, title and output schema are not forwarded).
pub fn to_protocol_descriptors(plan: &ToolPlan) -> Vec<llm_core::Tool> {
    plan.visible
        .iter()
        .map(|v| llm_core::Tool {
            name: v.descriptor.name.clone(),
            description: v.descriptor.description.clone(),
            parameters: v.descriptor.input_schema.clone(),
        })
        .collect()
}
