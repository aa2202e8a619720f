//! Azure OpenAI routes of the Responses API (API id [`crate::AZURE_API`]): where the
//! request goes, how it authenticates, and which deployment it names.
//!
//! Every setting comes from the request's provider options first, then from the
//! environment the provider reads ([`Env`]: the process environment, or variables it was given).
//! Pure functions of those inputs; no IO.

use std::collections::BTreeMap;

use llm_core::{Error, ErrorKind, Model, StreamOptions};
use llm_http::azure::{self, AzureAuth};
use llm_http::{Env, HeaderMap, insert_header};
use reqwest::Url;

use crate::AZURE_PROVIDER;

/// Base URL of a deployment's resource (`AZURE_OPENAI_BASE_URL`).
pub(crate) const ENV_BASE_URL: &str = "AZURE_OPENAI_BASE_URL";
/// Resource name, for `https://<name>.openai.azure.com/openai/v1`.
pub(crate) const ENV_RESOURCE_NAME: &str = "AZURE_OPENAI_RESOURCE_NAME";
/// `api-version` query value of the Azure client.
pub(crate) const ENV_API_VERSION: &str = "AZURE_OPENAI_API_VERSION";
/// `modelId=deployment,...`.
pub(crate) const ENV_DEPLOYMENT_MAP: &str = "AZURE_OPENAI_DEPLOYMENT_NAME_MAP";
/// The API key, when the request carries none.
pub(crate) const ENV_API_KEY: &str = "AZURE_OPENAI_API_KEY";
/// `api-version` when neither the options nor the environment set one.
pub(crate) const DEFAULT_API_VERSION: &str = "v1";

/// Which client shape the endpoint takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// Classic Azure OpenAI (and private gateways): `?api-version=`, `api-key` header.
    Azure,
    /// Azure AI Foundry's OpenAI-compatible `/openai/v1`: no `api-version`, bearer key.
    OpenAiCompatible,
}

/// A resolved Azure route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The normalized base URL (no trailing `/`).
    pub(crate) base: Url,
    /// The full request URL (`<base>/responses`, plus `api-version` on the Azure client).
    pub(crate) url: String,
    pub(crate) client: Client,
    pub(crate) auth: AzureAuth,
    /// The body's `model`.
    pub(crate) deployment: String,
}

impl Route {
    /// Classic Azure OpenAI hosts (`*.openai.azure.com`), where tools default to strict.
    pub(crate) fn is_classic_openai_host(&self) -> bool {
        self.base.host_str().is_some_and(|h| h.to_ascii_lowercase().ends_with(".openai.azure.com"))
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidRequest, AZURE_PROVIDER, message).with_retryable(false)
}

/// A string provider option, trimmed; `None` when absent or blank, an error when not a string.
fn option(options: &StreamOptions, name: &str) -> Result<Option<String>, Error> {
    azure::option(options, AZURE_PROVIDER, name)
}

/// Resolves the route of one request: base URL, client shape, auth and deployment.
pub(crate) fn resolve(model: &Model, options: &StreamOptions, env: &Env) -> Result<Route, Error> {
    let resource_name = option(options, "azureResourceName")?;
    let raw = option(options, "azureBaseUrl")?
        .or_else(|| env.first(&[ENV_BASE_URL]))
        .or_else(|| {
            resource_name
                .or_else(|| env.first(&[ENV_RESOURCE_NAME]))
                .map(|name| format!("https://{name}.openai.azure.com/openai/v1"))
        })
        .or_else(|| Some(model.base_url.trim().to_owned()).filter(|u| !u.is_empty()))
        .ok_or_else(|| {
            invalid(
                "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or \
                 AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or \
                 model.baseUrl.",
            )
        })?;
    let base = normalize_base_url(&raw)?;
    let client = client_for(&base);
    let api_version = option(options, "azureApiVersion")?
        .or_else(|| env.first(&[ENV_API_VERSION]))
        .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
    let auth = AzureAuth::from_options(options, AZURE_PROVIDER)?.unwrap_or(match client {
        Client::OpenAiCompatible => AzureAuth::Bearer,
        Client::Azure => AzureAuth::ApiKey,
    });
    let url = request_url(&base, client, &api_version);
    let deployment = option(options, "azureDeploymentName")?
        .or_else(|| {
            env.first(&[ENV_DEPLOYMENT_MAP])
                .and_then(|map| parse_deployment_map(&map).remove(model.id.as_str()))
        })
        .unwrap_or_else(|| model.id.clone());
    Ok(Route { base, url, client, auth, deployment })
}

/// Trims, drops trailing `/`, and points a classic host's bare or `/openai` path at the
/// v1 route (`/openai/v1`, query cleared); any other URL keeps its path and query.
pub(crate) fn normalize_base_url(raw: &str) -> Result<Url, Error> {
    let trimmed = raw.trim().trim_end_matches('/');
    let mut url = Url::parse(trimmed)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| invalid(format!("Invalid Azure OpenAI base URL: {raw}")))?;
    let classic = url.host_str().is_some_and(azure::is_resource_host);
    if classic && matches!(url.path(), "" | "/" | "/openai" | "/openai/") {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&path);
    Ok(url)
}

/// Foundry's OpenAI-compatible endpoints (`*.services.ai.azure.com`,
/// `*.api.cognitive.microsoft.com`, path ending `/openai/v1`) take the plain OpenAI
/// client; classic hosts, gateways and other paths the Azure client.
pub(crate) fn client_for(base: &Url) -> Client {
    let host = base.host_str().unwrap_or_default().to_ascii_lowercase();
    let classic = azure::is_resource_host(&host);
    let foundry =
        host.ends_with(".services.ai.azure.com") || host.ends_with(".api.cognitive.microsoft.com");
    let path = base.path().trim_end_matches('/');
    if !classic && foundry && path.ends_with("/openai/v1") {
        Client::OpenAiCompatible
    } else {
        Client::Azure
    }
}

/// `<base>/responses`, with `api-version` added to the base's own query on the Azure
/// client (a gateway's query survives, unlike OpenClaw's SDK concatenation).
fn request_url(base: &Url, client: Client, api_version: &str) -> String {
    let mut url = base.clone();
    let path = format!("{}{}", base.path().trim_end_matches('/'), crate::convert::PATH);
    url.set_path(&path);
    if client == Client::Azure {
        url.query_pairs_mut().append_pair("api-version", api_version);
    }
    url.to_string()
}

/// `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`: comma-separated `modelId=deployment`, entries
/// trimmed, split at the first `=` (later ones belong to the deployment), entries with
/// an empty side skipped, later duplicates win.
pub(crate) fn parse_deployment_map(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for entry in text.split(',') {
        let Some((model, deployment)) = entry.trim().split_once('=') else { continue };
        let (model, deployment) = (model.trim(), deployment.trim());
        if !model.is_empty() && !deployment.is_empty() {
            map.insert(model.to_owned(), deployment.to_owned());
        }
    }
    map
}

/// Headers of an Azure request: defaults, `model.headers`, `options.headers`, then the
/// key. On the Azure client the request's key wins over an `api-key` in the configured
/// headers (an `Authorization` there is sent as well); on the OpenAI-compatible client a
/// configured `Authorization` wins over the key.
pub(crate) fn headers(
    route: &Route,
    model: &Model,
    options: &StreamOptions,
    env: &Env,
) -> Result<HeaderMap, Error> {
    let mut headers = HeaderMap::new();
    insert_header(&mut headers, AZURE_PROVIDER, "content-type", "application/json")?;
    insert_header(&mut headers, AZURE_PROVIDER, "accept", "text/event-stream")?;
    let key = options
        .api_key
        .as_ref()
        .map(|k| k.expose().to_owned())
        .filter(|k| !k.trim().is_empty())
        .or_else(|| env.first(&[ENV_API_KEY]));
    let configured = model.headers.iter().chain(options.headers.iter());
    let configured_auth = model
        .headers
        .keys()
        .chain(options.headers.keys())
        .any(|k| k.eq_ignore_ascii_case("authorization") || k.eq_ignore_ascii_case("api-key"));
    let Some(key) = key else {
        if configured_auth {
            for (name, value) in configured {
                insert_header(&mut headers, AZURE_PROVIDER, name, value)?;
            }
            return Ok(headers);
        }
        return Err(Error::new(
            ErrorKind::Auth,
            AZURE_PROVIDER,
            "Azure OpenAI API key is required. Set AZURE_OPENAI_API_KEY environment variable \
             or pass it as an argument.",
        )
        .with_retryable(false));
    };
    match (route.client, route.auth) {
        (Client::OpenAiCompatible, _) => {
            insert_header(&mut headers, AZURE_PROVIDER, "authorization", &format!("Bearer {key}"))?;
            for (name, value) in configured {
                insert_header(&mut headers, AZURE_PROVIDER, name, value)?;
            }
        }
        (Client::Azure, AzureAuth::ApiKey) => {
            for (name, value) in configured {
                insert_header(&mut headers, AZURE_PROVIDER, name, value)?;
            }
            insert_header(&mut headers, AZURE_PROVIDER, "api-key", &key)?;
        }
        (Client::Azure, AzureAuth::Bearer) => {
            // An Entra token: sent as the bearer, never as `api-key` (OpenClaw's bug).
            for (name, value) in configured {
                insert_header(&mut headers, AZURE_PROVIDER, name, value)?;
            }
            headers.remove("api-key");
            insert_header(&mut headers, AZURE_PROVIDER, "authorization", &format!("Bearer {key}"))?;
        }
    }
    Ok(headers)
}

#[cfg(test)]
mod tests;
