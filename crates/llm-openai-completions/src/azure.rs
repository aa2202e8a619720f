//! Azure OpenAI's Chat Completions routes: a model on an Azure host (or with provider
//! `azure-openai`) sends its key as `api-key` (or, for a Microsoft Entra ID token, as
//! `Authorization: Bearer`), and a deployment route carries `api-version`.
//!
//! The base URL names the route: `https://<resource>.openai.azure.com/openai/deployments/<deployment>`
//! (the deployment in the path; `api-version` required) or `.../openai/v1` (the
//! deployment is the body's `model`).

use llm_core::{Error, Model, StreamOptions};
use llm_http::azure::{self, AzureAuth};
use reqwest::Url;

/// `api-version` of a deployment route when the `azureApiVersion` option sets none
/// (the latest GA version of the data-plane API with streamed usage and tools).
pub(crate) const DEFAULT_DEPLOYMENT_API_VERSION: &str = "2024-10-21";

/// A request's Azure route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The full URL (`.../chat/completions`, with `api-version` where it belongs).
    pub(crate) url: String,
    pub(crate) auth: AzureAuth,
}

/// The Azure route of `model`, `None` when it is not an Azure model.
pub(crate) fn route(
    model: &Model,
    options: &StreamOptions,
    provider: &str,
) -> Result<Option<Route>, Error> {
    let base = model.base_url.trim().trim_end_matches('/');
    if model.provider != "azure-openai" && !may_name_azure(base) {
        return Ok(None);
    }
    let Ok(mut url) = Url::parse(base) else { return Ok(None) };
    let azure_host = url.host_str().is_some_and(azure::is_resource_host);
    if !azure_host && model.provider != "azure-openai" {
        return Ok(None);
    }
    let auth = AzureAuth::from_options(options, provider)?.unwrap_or(AzureAuth::ApiKey);
    let path = url.path().trim_end_matches('/').to_owned();
    if !path.ends_with(crate::convert::ENDPOINT) {
        url.set_path(&format!("{path}{}", crate::convert::ENDPOINT));
    }
    let deployment_route = path.contains("/openai/deployments/");
    let version = azure::option(options, provider, "azureApiVersion")?
        .or_else(|| deployment_route.then(|| DEFAULT_DEPLOYMENT_API_VERSION.to_owned()));
    if let Some(version) = version
        && !url.query_pairs().any(|(k, _)| k == "api-version")
    {
        url.query_pairs_mut().append_pair("api-version", &version);
    }
    Ok(Some(Route { url: url.to_string(), auth }))
}

/// Whether `base` may name an Azure host, so that only then is it parsed (a URL parse costs
/// more than the rest of a request's conversion). A parse decodes percent escapes and maps
/// other scripts in a host before it is compared, so either sends the URL to the parse too.
fn may_name_azure(base: &str) -> bool {
    base.bytes().any(|b| b == b'%' || !b.is_ascii())
        || base.as_bytes().windows(5).any(|w| w.eq_ignore_ascii_case(b"azure"))
}

#[cfg(test)]
mod tests;
