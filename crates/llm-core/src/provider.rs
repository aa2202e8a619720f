//! The [`Provider`] trait, the registry keyed by API id, and what a provider crate
//! declares about itself as data: its [`Capabilities`] and its [`ProviderInfo`]
//! (API id, default base URL, key variables, known models), which `claw`, the
//! conformance grid and the docs read instead of hard-coding them.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::error::{Error, ErrorKind};
use crate::options::StreamOptions;
use crate::stream::AssistantStream;
use crate::types::{AssistantMessage, Context, InputModality, Model, ModelCost};

/// One thing a provider may or may not support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Streamed text with usage and stop reasons (the base of every scenario).
    Streaming,
    /// Tool definitions and tool calls.
    Tools,
    /// More than one tool call in one response.
    ParallelToolCalls,
    /// Tool-call arguments arrive in fragments (rather than whole).
    StreamingToolArguments,
    /// Thinking / reasoning content.
    Thinking,
    /// Images in user messages.
    ImagesInUserMessages,
    /// Images inside tool results.
    ImagesInToolResults,
    /// Prompt caching, with cache read / write usage.
    PromptCaching,
    /// Strict tool schemas (normalized without loss, else sent non-strict).
    StrictSchemas,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: &[Capability] = &[
        Capability::Streaming,
        Capability::Tools,
        Capability::ParallelToolCalls,
        Capability::StreamingToolArguments,
        Capability::Thinking,
        Capability::ImagesInUserMessages,
        Capability::ImagesInToolResults,
        Capability::PromptCaching,
        Capability::StrictSchemas,
    ];

    /// The kebab-case name (`parallel-tool-calls`), as `fixtures/SCENARIOS.md` uses it.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::Streaming => "streaming",
            Capability::Tools => "tools",
            Capability::ParallelToolCalls => "parallel-tool-calls",
            Capability::StreamingToolArguments => "streaming-tool-arguments",
            Capability::Thinking => "thinking",
            Capability::ImagesInUserMessages => "images-in-user-messages",
            Capability::ImagesInToolResults => "images-in-tool-results",
            Capability::PromptCaching => "prompt-caching",
            Capability::StrictSchemas => "strict-schemas",
        }
    }

    /// The capability named `name` ([`Capability::name`]).
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.iter().copied().find(|c| c.name() == name)
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Capability`]s, buildable in `const` context.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u32);

impl Capabilities {
    /// No capability: every shared conformance scenario is skipped.
    pub const NONE: Capabilities = Capabilities(0);

    /// Every capability ([`Capability::ALL`]); a provider that lacks a few says which
    /// ([`Capabilities::without`]).
    pub const ALL: Capabilities = Capabilities::of(Capability::ALL);

    /// The set of `list`.
    #[allow(clippy::indexing_slicing, reason = "i < list.len(); a const fn cannot use iterators")]
    pub const fn of(list: &[Capability]) -> Capabilities {
        let mut bits = 0;
        let mut i = 0;
        while i < list.len() {
            bits |= list[i].bit();
            i += 1;
        }
        Capabilities(bits)
    }

    /// This set plus `capability`.
    pub const fn with(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 | capability.bit())
    }

    /// This set less `capability`.
    pub const fn without(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 & !capability.bit())
    }

    /// Whether `capability` is in the set.
    pub const fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// The capabilities in the set, in [`Capability::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.iter().copied().filter(move |c| self.contains(*c))
    }
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(Capability::name)).finish()
    }
}

/// A model a provider crate knows: limits, prices and what it accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelInfo {
    /// The id sent to the API.
    pub id: &'static str,
    /// Whether it reasons (thinking).
    pub reasoning: bool,
    /// Whether it accepts images.
    pub images: bool,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens.
    pub max_tokens: u64,
    /// Prices per million tokens.
    pub cost: ModelCost,
}

impl ModelInfo {
    /// A text-only, non-reasoning model; prices are `[input, output, cache read, cache
    /// write]` per million tokens.
    pub const fn new(
        id: &'static str,
        context_window: u64,
        max_tokens: u64,
        cost: [f64; 4],
    ) -> Self {
        let [input, output, cache_read, cache_write] = cost;
        ModelInfo {
            id,
            reasoning: false,
            images: false,
            context_window,
            max_tokens,
            cost: ModelCost { input, output, cache_read, cache_write },
        }
    }

    /// The same model, reasoning.
    pub const fn reasoning(self) -> Self {
        ModelInfo { reasoning: true, ..self }
    }

    /// The same model, accepting images.
    pub const fn images(self) -> Self {
        ModelInfo { images: true, ..self }
    }
}

/// What a provider crate exports about itself (each crate has a `pub const INFO`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderInfo {
    /// The crate's short name (`llm-<name>`): the `fixtures/<name>/` folder and the
    /// name `claw --provider` takes.
    pub name: &'static str,
    /// The API id it serves ([`Provider::api`]).
    pub api: &'static str,
    /// The provider name its models carry by default ([`Model::provider`]).
    pub provider: &'static str,
    /// The public endpoint's base URL.
    pub default_base_url: &'static str,
    /// Environment variables that may hold the API key, first found wins.
    pub key_env: &'static [&'static str],
    /// What it supports.
    pub capabilities: Capabilities,
    /// Known models; the first is the default.
    pub models: &'static [ModelInfo],
    /// How each model family carries a structured output format; the first row whose
    /// pattern the model id contains wins, and a model no row matches cannot carry one
    /// ([`ProviderInfo::output_mode`]).
    pub output: &'static [crate::output::OutputFamily],
}

impl ProviderInfo {
    /// The known model `id` as a [`Model`] on the default base URL.
    pub fn model(&self, id: &str) -> Option<Model> {
        self.models.iter().find(|m| m.id == id).map(|m| self.model_from(m))
    }

    /// The default model (the first known one).
    pub fn default_model(&self) -> Option<Model> {
        self.models.first().map(|m| self.model_from(m))
    }

    fn model_from(&self, info: &ModelInfo) -> Model {
        let mut input = vec![InputModality::Text];
        if info.images {
            input.push(InputModality::Image);
        }
        Model {
            id: info.id.to_owned(),
            api: self.api.to_owned(),
            provider: self.provider.to_owned(),
            base_url: self.default_base_url.to_owned(),
            reasoning: info.reasoning,
            input,
            cost: info.cost,
            context_window: info.context_window,
            max_tokens: info.max_tokens,
            ..Model::default()
        }
    }
}

/// One LLM API. Implemented once per provider crate.
///
/// `stream` never fails synchronously: every failure (missing key, HTTP error,
/// bad stream) arrives as the stream's terminal `error` event.
pub trait Provider: Send + Sync {
    /// The API id this provider serves (`anthropic-messages`, ...).
    fn api(&self) -> &str;

    /// What this provider supports (default: nothing declared).
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    /// Streams one assistant response.
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream;

    /// Collects [`Provider::stream`] into the final message.
    fn complete(
        &self,
        model: &Model,
        context: &Context,
        options: &StreamOptions,
    ) -> BoxFuture<'static, AssistantMessage> {
        Box::pin(self.stream(model, context, options).result())
    }
}

/// A [`Provider`] that prints itself with `Debug`, as every provider crate's does: registries
/// hand these out so that a secret scan can check the printed form holds no key.
pub trait DebugProvider: Provider + std::fmt::Debug {}

impl<T: Provider + std::fmt::Debug + ?Sized> DebugProvider for T {}

/// Providers by API id. Register only the ones you depend on.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    providers: BTreeMap<String, Arc<dyn Provider>>,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.providers.keys()).finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `provider` under its API id (replacing any earlier one).
    pub fn register(&mut self, provider: Arc<dyn Provider>) -> &mut Self {
        self.providers.insert(provider.api().to_owned(), provider);
        self
    }

    /// The provider for `api`.
    pub fn get(&self, api: &str) -> Option<&Arc<dyn Provider>> {
        self.providers.get(api)
    }

    /// Registered API ids.
    pub fn apis(&self) -> impl Iterator<Item = &str> {
        self.providers.keys().map(String::as_str)
    }
}

impl Provider for ProviderRegistry {
    fn api(&self) -> &str {
        "registry"
    }

    /// Dispatches on `model.api`; an unregistered API ends in an error event.
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        match self.providers.get(&model.api) {
            Some(p) => p.stream(model, context, options),
            None => AssistantStream::from_error(
                model,
                Error::new(
                    ErrorKind::Unsupported,
                    "clawcall",
                    format!("No API provider registered for api: {}", model.api),
                ),
            ),
        }
    }
}
