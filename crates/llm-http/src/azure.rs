//! What the OpenAI wire formats share about Azure OpenAI's routes: its resource hosts, its
//! provider options (`azure…`, each a string) and how the key is sent. Each crate keeps
//! only its own route: Chat Completions takes a deployment URL as given, Responses
//! resolves one from the options and the environment.

use llm_core::{Error, ErrorKind, StreamOptions};

/// How the key is sent on an Azure route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureAuth {
    /// `api-key: <key>` (a resource key).
    ApiKey,
    /// `Authorization: Bearer <key>` (a Microsoft Entra ID token, or a Foundry key).
    Bearer,
}

impl AzureAuth {
    /// The `azureAuth` provider option: `api-key`, or `bearer` / `entra` (an Entra ID token);
    /// `None` when it is not set, an `invalid_request` error of `provider` for anything else.
    pub fn from_options(options: &StreamOptions, provider: &str) -> Result<Option<Self>, Error> {
        match option(options, provider, "azureAuth")?.as_deref() {
            None => Ok(None),
            Some("api-key") => Ok(Some(AzureAuth::ApiKey)),
            Some("bearer" | "entra") => Ok(Some(AzureAuth::Bearer)),
            Some(other) => Err(Error::new(
                ErrorKind::InvalidRequest,
                provider,
                format!(
                    "provider option azureAuth must be \"api-key\", \"bearer\" or \"entra\", not {other:?}"
                ),
            )
            .with_retryable(false)),
        }
    }
}

/// The string provider option `key` (`azureApiVersion`, ...), trimmed; `None` when absent or
/// blank, an `invalid_request` error of `provider` when it is not a string.
pub fn option(options: &StreamOptions, provider: &str, key: &str) -> Result<Option<String>, Error> {
    options.text_provider_option(provider, "Azure OpenAI", key)
}

/// Whether `host` is an Azure OpenAI resource (`*.openai.azure.com`,
/// `*.cognitiveservices.azure.com`), in any case.
pub fn is_resource_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host.ends_with(".openai.azure.com") || host.ends_with(".cognitiveservices.azure.com")
}

#[cfg(test)]
mod tests;
