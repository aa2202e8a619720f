//! Azure OpenAI's Chat Completions routes: a model on an Azure host (or with provider
//! `azure-openai`) sends its key as `api-key` (or, for a Microsoft Entra ID token, as
//! `Authorization: Bearer`), and a deployment route carries `api-version`.
//!
//! The base URL names the route: `https://<resource>.openai.azure.com/openai/deployments/<deployment>`
//! (the deployment in the path; `api-version` required) or `.../openai/v1` (the
//! deployment is the body's `model`).

use llm_core::{Error, ErrorKind, Model, StreamOptions};
use reqwest::Url;

/// `api-version` of a deployment route when the `azureApiVersion` option sets none
/// (the latest GA version of the data-plane API with streamed usage and tools).
pub(crate) const DEFAULT_DEPLOYMENT_API_VERSION: &str = "2024-10-21";

/// How the key is sent on an Azure route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `api-key: <key>` (a resource key).
    ApiKey,
    /// `Authorization: Bearer <key>` (an Entra ID token).
    Bearer,
}

/// A request's Azure route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The full URL (`.../chat/completions`, with `api-version` where it belongs).
    pub(crate) url: String,
    pub(crate) auth: Auth,
}

fn is_azure_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host.ends_with(".openai.azure.com") || host.ends_with(".cognitiveservices.azure.com")
}

/// The Azure route of `model`, `None` when it is not an Azure model.
pub(crate) fn route(
    model: &Model,
    options: &StreamOptions,
    provider: &str,
) -> Result<Option<Route>, Error> {
    let invalid = |message: String| {
        Error::new(ErrorKind::InvalidRequest, provider, message).with_retryable(false)
    };
    let base = model.base_url.trim().trim_end_matches('/');
    let Ok(mut url) = Url::parse(base) else { return Ok(None) };
    let azure_host = url.host_str().is_some_and(is_azure_host);
    if !azure_host && model.provider != "azure-openai" {
        return Ok(None);
    }
    let text = |key: &str| options.text_provider_option(provider, "Azure OpenAI", key);
    let auth = match text("azureAuth")?.as_deref() {
        None | Some("api-key") => Auth::ApiKey,
        Some("bearer" | "entra") => Auth::Bearer,
        Some(other) => {
            return Err(invalid(format!(
                "providerOptions.azureAuth must be \"api-key\", \"bearer\" or \"entra\", not {other:?}"
            )));
        }
    };
    let path = url.path().trim_end_matches('/').to_owned();
    if !path.ends_with(crate::convert::ENDPOINT) {
        url.set_path(&format!("{path}{}", crate::convert::ENDPOINT));
    }
    let deployment_route = path.contains("/openai/deployments/");
    let version = text("azureApiVersion")?
        .or_else(|| deployment_route.then(|| DEFAULT_DEPLOYMENT_API_VERSION.to_owned()));
    if let Some(version) = version
        && !url.query_pairs().any(|(k, _)| k == "api-version")
    {
        url.query_pairs_mut().append_pair("api-version", &version);
    }
    Ok(Some(Route { url: url.to_string(), auth }))
}

#[cfg(test)]
mod tests;
