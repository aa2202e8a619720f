//! The [`Provider`] trait and the registry keyed by API id.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::error::{Error, ErrorKind};
use crate::options::StreamOptions;
use crate::stream::AssistantStream;
use crate::types::{AssistantMessage, Context, Model};

/// One LLM API. Implemented once per provider crate.
///
/// `stream` never fails synchronously: every failure (missing key, HTTP error,
/// bad stream) arrives as the stream's terminal `error` event.
pub trait Provider: Send + Sync {
    /// The API id this provider serves (`anthropic-messages`, ...).
    fn api(&self) -> &str;

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
