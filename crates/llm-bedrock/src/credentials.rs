//! AWS's default credential chain, after the environment's and the profile's static keys
//! (feature `aws-config`).
//!
//! When [`crate::auth`] finds no key, no environment keys and no static keys in the
//! profile, `aws-config`'s default chain is asked, with the provider's environment (the
//! process's or the one given to the provider's builder; the environment's keys left
//! out when a profile is selected, which skips them as OpenClaw does), the selected profile
//! and the signing region: the profile with SSO (`sso_session`, the token cache under
//! `~/.aws/sso/cache`), assume-role (`role_arn` with `source_profile`), `credential_process`
//! or `web_identity_token_file`; web identity from `AWS_WEB_IDENTITY_TOKEN_FILE` and
//! `AWS_ROLE_ARN`; container credentials (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or
//! `_FULL_URI`, with `AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]`); and instance metadata
//! (IMDSv2, `AWS_EC2_METADATA_SERVICE_ENDPOINT`, `AWS_EC2_METADATA_DISABLED`).
//!
//! Its HTTP calls go through the provider's own `reqwest` client (one TLS stack, the same
//! proxies for STS and the SSO portal), except calls to a loopback or link-local address
//! (instance metadata, container credentials), which never go through a proxy: a proxy
//! cannot reach them, and must not see their tokens. Each call is bounded in time and in
//! the size of the answer read; one resolution is bounded by [`DEFAULT_CREDENTIALS_TIMEOUT`].
//!
//! Credentials are kept per selected profile and used until five minutes before they
//! expire (credentials without an expiry: fifteen minutes, as the AWS SDKs' identity cache
//! does), then resolved again: requests never sign with credentials about to expire.
//! Concurrent requests wait for one resolution.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::provider::ProvideCredentials;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::error::display::DisplayErrorContext;
use llm_core::{Error, StreamOptions};

use crate::auth::{self, Auth, AwsCredentials, CredentialSource, Missing};
use llm_http::Env;

/// How long one resolution of the default chain may take.
pub const DEFAULT_CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(30);

/// Credentials are resolved again this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// How long credentials without an expiry are kept.
const KEEP_WITHOUT_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// The largest answer read from a credential endpoint (they are a few hundred bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The bound on one credential HTTP call when `aws-config` sets no timeout.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How many profiles' credentials are kept.
const MAX_KEPT: usize = 16;

/// The environment variables that carry static keys, left out when a profile is selected.
const KEY_VARIABLES: [&str; 3] =
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"];

/// The credentials the chain gave, per selected profile. Shared by a provider's clones.
#[derive(Clone)]
pub(crate) struct CredentialCache {
    kept: Arc<tokio::sync::Mutex<Vec<Kept>>>,
    /// The bound on one resolution.
    pub(crate) timeout: Duration,
}

struct Kept {
    profile: Option<String>,
    credentials: AwsCredentials,
    refresh_at: SystemTime,
}

impl Default for CredentialCache {
    fn default() -> Self {
        CredentialCache { kept: Arc::default(), timeout: DEFAULT_CREDENTIALS_TIMEOUT }
    }
}

impl fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = self.kept.try_lock().map(|k| k.len()).ok();
        f.debug_struct("CredentialCache")
            .field("kept", &kept)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl CredentialCache {
    /// SigV4 with the chain's credentials for `missing.region`, from the cache while they
    /// are fresh.
    ///
    /// # Errors
    ///
    /// [`llm_core::ErrorKind::Auth`] naming every source tried and why the chain found
    /// nothing (never a secret); a resolution that takes longer than the timeout fails too.
    pub(crate) async fn resolve(
        &self,
        client: &reqwest::Client,
        options: &StreamOptions,
        env: &Env,
        missing: Missing,
    ) -> Result<Auth, Error> {
        let getter = |name: &str| env.get(name);
        let profile = auth::selected_profile(options, &getter);
        let mut kept = self.kept.lock().await;
        let now = SystemTime::now();
        if let Some(fresh) = kept.iter().find(|k| k.profile == profile && now < k.refresh_at) {
            return Ok(Auth::SigV4 {
                credentials: fresh.credentials.clone(),
                region: missing.region,
            });
        }
        let load = load(client, env, profile.as_deref(), &missing.region);
        let loaded = match tokio::time::timeout(self.timeout, load).await {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(why)) => return Err(missing.error(Some(&why))),
            Err(_) => {
                let why = format!("no answer within {} ms", self.timeout.as_millis());
                return Err(missing.error(Some(&why)));
            }
        };
        let refresh_at = match loaded.expiry() {
            Some(expiry) => expiry.checked_sub(REFRESH_BEFORE_EXPIRY).unwrap_or(expiry),
            None => now + KEEP_WITHOUT_EXPIRY,
        };
        let credentials = AwsCredentials::from_source(
            loaded.access_key_id().to_owned(),
            loaded.secret_access_key().to_owned(),
            loaded.session_token().map(str::to_owned),
            CredentialSource::DefaultChain,
        );
        kept.retain(|k| k.profile != profile);
        if kept.len() >= MAX_KEPT {
            kept.remove(0);
        }
        kept.push(Kept { profile, credentials: credentials.clone(), refresh_at });
        Ok(Auth::SigV4 { credentials, region: missing.region })
    }
}

/// Asks the default chain once.
async fn load(
    client: &reqwest::Client,
    env: &Env,
    profile: Option<&str>,
    region: &str,
) -> Result<aws_credential_types::Credentials, String> {
    let mut vars: std::collections::HashMap<String, String> = env.all().into_iter().collect();
    if profile.is_some() {
        for name in KEY_VARIABLES {
            vars.remove(name);
        }
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .env(aws_types::os_shim_internal::Env::from(vars))
        .http_client(ReqwestHttp { client: client.clone(), direct: Arc::default() })
        .region(aws_types::region::Region::new(region.to_owned()));
    if let Some(profile) = profile {
        loader = loader.profile_name(profile);
    }
    let config = loader.load().await;
    let provider = config.credentials_provider().ok_or_else(|| "no chain".to_owned())?;
    provider.provide_credentials().await.map_err(|e| DisplayErrorContext(&e).to_string())
}

/// `aws-config`'s HTTP calls through a `reqwest` client.
#[derive(Debug, Clone)]
struct ReqwestHttp {
    /// The provider's client.
    client: reqwest::Client,
    /// A client without proxies, for loopback and link-local addresses (built when needed).
    direct: Arc<std::sync::OnceLock<reqwest::Client>>,
}

impl HttpClient for ReqwestHttp {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let timeout = match (settings.connect_timeout(), settings.read_timeout()) {
            (None, None) => DEFAULT_CALL_TIMEOUT,
            (connect, read) => connect.unwrap_or_default() + read.unwrap_or(DEFAULT_CALL_TIMEOUT),
        };
        SharedHttpConnector::new(ReqwestConnector { http: self.clone(), timeout })
    }
}

/// Whether `uri`'s host is a loopback or link-local address (IMDS `169.254.169.254` and
/// `fd00:ec2::254`, the ECS endpoints `169.254.170.2` and `169.254.170.23`).
fn is_local(uri: &str) -> bool {
    let Ok(uri) = uri.parse::<http::Uri>() else { return false };
    let host = uri.host().unwrap_or_default();
    match host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.segments().first().is_some_and(|s| *s == 0xfd00)
        }
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

#[derive(Debug)]
struct ReqwestConnector {
    http: ReqwestHttp,
    timeout: Duration,
}

impl HttpConnector for ReqwestConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = if is_local(request.uri()) {
            let direct = self.http.direct.get_or_init(|| {
                // Without proxies only; should the builder fail, the provider's client.
                reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .unwrap_or_else(|_| self.http.client.clone())
            });
            direct.clone()
        } else {
            self.http.client.clone()
        };
        let timeout = self.timeout;
        HttpConnectorFuture::new(async move { call(client, timeout, request).await })
    }
}

fn other(what: impl Into<String>) -> ConnectorError {
    ConnectorError::other(what.into().into(), None)
}

/// One credential call: the request as given, the answer read up to [`MAX_ANSWER_BYTES`].
async fn call(
    client: reqwest::Client,
    timeout: Duration,
    request: HttpRequest,
) -> Result<HttpResponse, ConnectorError> {
    let body = request
        .body()
        .bytes()
        .map(bytes::Bytes::copy_from_slice)
        .ok_or_else(|| other("a streamed request body is not supported"))?;
    let method = reqwest::Method::from_bytes(request.method().as_bytes())
        .map_err(|_| other("invalid HTTP method"))?;
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in request.headers().iter() {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| other("invalid header name"))?;
        let mut value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| other(format!("invalid value for header {name}")))?;
        value.set_sensitive(llm_http::is_secret_header(name.as_str()));
        headers.append(name, value);
    }
    let failed = |e: reqwest::Error| {
        let e = e.without_url();
        if e.is_timeout() {
            ConnectorError::timeout(e.into())
        } else {
            ConnectorError::io(e.into())
        }
    };
    let mut response = client
        .request(method, request.uri())
        .headers(headers)
        .body(body)
        .timeout(timeout)
        .send()
        .await
        .map_err(failed)?;
    let status = StatusCode::try_from(response.status().as_u16())
        .map_err(|_| other("invalid HTTP status"))?;
    let received = response.headers().clone();
    let mut answer = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(other(format!("a credential answer over {MAX_ANSWER_BYTES} bytes")));
        }
        answer.extend_from_slice(&chunk);
    }
    let mut out = Response::new(status, SdkBody::from(answer));
    for (name, value) in &received {
        if let Ok(value) = value.to_str() {
            // A header the SDK's type rejects is dropped: credential answers are in the body.
            let _ = out.headers_mut().try_append(name.as_str().to_owned(), value.to_owned());
        }
    }
    Ok(out)
}
