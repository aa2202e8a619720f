//! Bedrock authentication and the signing region.
//!
//! [`resolve_auth`] picks, per request, in OpenClaw's order:
//! 1. a Bedrock API key: [`StreamOptions::api_key`], else `AWS_BEARER_TOKEN_BEDROCK` (an empty
//!    value counts as absent), sent as `Authorization: Bearer`, unless
//!    `AWS_BEDROCK_SKIP_AUTH=1`;
//! 2. `AWS_BEDROCK_SKIP_AUTH=1`: SigV4 with the fixed dummy keys `dummy-access-key` /
//!    `dummy-secret-key`, for proxies that do not authenticate;
//! 3. SigV4 with credentials from, first success wins:
//!    - the environment (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, optional
//!      `AWS_SESSION_TOKEN`), skipped when a profile is selected;
//!    - the shared config and credentials files (`AWS_CONFIG_FILE`, else `~/.aws/config`;
//!      `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`; the credentials file wins
//!      key by key), profile `profile` of [`StreamOptions::provider_options`], else
//!      `AWS_PROFILE`, else `default`: its `aws_access_key_id`, `aws_secret_access_key`
//!      and `aws_session_token`.
//!
//!    The files are read again on every call, so rotated keys are picked up without a
//!    restart (OpenClaw's credential refresh, #77551);
//! 4. with the `aws-config` feature, AWS's default credential chain: a profile with SSO,
//!    assume-role, `credential_process` or web identity, then web identity from the
//!    environment, container and instance-metadata (IMDSv2) credentials, kept until shortly
//!    before they expire (see the crate's `credentials.rs`).
//!
//! No credentials at all (without the feature: a profile that uses one of those sources) is
//! an [`ErrorKind::Auth`] error that names every source tried and what each lacked.
//!
//! [`apply`] adds the headers to the final request: `authorization` for a key, or the SigV4
//! signature for service `bedrock` computed by AWS's `aws-sigv4` crate (`authorization`,
//! `x-amz-date`, `x-amz-content-sha256` as the JS SDK sends it, `x-amz-security-token` with a
//! session token); the canonical URI is double-encoded as every non-S3 service expects, so a
//! model ARN's `%3A` and `%2F` are signed as `%253A` and `%252F`.
//!
//! Secrets stay redacted: [`AwsCredentials`] keeps the secret key and the session token as
//! [`ApiKey`]s (`Debug` prints `[REDACTED]`), errors name variables, profiles and files but
//! never a value, and `llm-http` marks the added headers sensitive.
//!
//! The shared files are parsed here, by a small parser of AWS's dialect (the rules of the
//! AWS SDKs' shared-file loader: `[profile name]` sections in the config file and `[name]` in
//! the credentials file, `#` and `;` comments at a line start or after whitespace, indented
//! sub-properties). A generic INI crate knows none of these rules, and the one Rust
//! implementation that does (`aws-config`) is an async crate that also pulls in the STS and
//! SSO clients, so it is an optional feature; the parser is 60 lines of that dialect and
//! covers static keys without it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use llm_core::{ApiKey, Error, ErrorKind, StreamOptions};
use llm_http::{HttpRequest, insert_header};
use serde_json::Value;

use crate::PROVIDER;

/// The environment variable holding a Bedrock API key.
pub const BEARER_TOKEN_ENV: &str = "AWS_BEARER_TOKEN_BEDROCK";
/// `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys (proxies that do not authenticate).
pub const SKIP_AUTH_ENV: &str = "AWS_BEDROCK_SKIP_AUTH";
/// The [`StreamOptions::provider_options`] key of the region (a string).
pub const REGION_OPTION: &str = "region";
/// The [`StreamOptions::provider_options`] key of the shared-config profile (a string).
pub const PROFILE_OPTION: &str = "profile";
/// The region when nothing configures one.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The SigV4 signing name of the Bedrock runtime.
const SIGNING_NAME: &str = "bedrock";

/// Where a set of AWS credentials came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialSource {
    /// Given by the caller ([`AwsCredentials::new`]).
    Explicit,
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`.
    Environment,
    /// A profile of the shared config or credentials file.
    Profile(String),
    /// The dummy keys of `AWS_BEDROCK_SKIP_AUTH=1`.
    SkipAuth,
    /// AWS's default credential chain (feature `aws-config`): SSO, assume-role,
    /// `credential_process`, web identity, container or instance metadata.
    DefaultChain,
}

/// AWS credentials. `Debug` shows the access key id and redacts the secret and the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    access_key_id: String,
    secret_access_key: ApiKey,
    session_token: Option<ApiKey>,
    source: CredentialSource,
}

impl AwsCredentials {
    /// Credentials given by the caller.
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        Self::from_source(
            access_key_id.into(),
            secret_access_key.into(),
            session_token,
            CredentialSource::Explicit,
        )
    }

    pub(crate) fn from_source(
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
        source: CredentialSource,
    ) -> Self {
        AwsCredentials {
            access_key_id,
            secret_access_key: ApiKey::new(secret_access_key),
            session_token: session_token.filter(|t| !t.is_empty()).map(ApiKey::new),
            source,
        }
    }

    /// The access key id (not a secret: it names the key).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// Whether a session token (temporary credentials) is present.
    pub fn has_session_token(&self) -> bool {
        self.session_token.is_some()
    }

    /// Where these credentials came from.
    pub fn source(&self) -> &CredentialSource {
        &self.source
    }
}

/// How a request authenticates. `Debug` redacts every secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A Bedrock API key, sent as `Authorization: Bearer`.
    Bearer(ApiKey),
    /// SigV4 signing for service `bedrock` in `region`.
    SigV4 {
        /// The signing credentials.
        credentials: AwsCredentials,
        /// The signing region.
        region: String,
    },
}

/// A string provider option, `None` when absent or empty.
fn string_option<'a>(options: &'a StreamOptions, key: &str) -> Option<&'a str> {
    options.provider_options.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// An environment variable, `None` when unset or empty.
fn var(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// The region the caller configured: option `region`, else `AWS_REGION`, else
/// `AWS_DEFAULT_REGION` (OpenClaw's `configuredRegion`).
pub fn configured_region(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    string_option(options, REGION_OPTION)
        .map(str::to_owned)
        .or_else(|| var(env, "AWS_REGION"))
        .or_else(|| var(env, "AWS_DEFAULT_REGION"))
}

/// The profile the caller selected: option `profile`, else `AWS_PROFILE` (OpenClaw's
/// `hasProfile`); `None` means the `default` profile, and the environment's keys are used
/// first.
pub fn selected_profile(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    string_option(options, PROFILE_OPTION).map(str::to_owned).or_else(|| var(env, "AWS_PROFILE"))
}

/// The signing region: the [`configured_region`]; else, when a profile is
/// selected, that profile's `region` in the shared config (the credentials file's as a
/// fallback); else [`DEFAULT_REGION`].
///
/// A caller that pins a standard regional endpoint with nothing configured signs for the
/// endpoint's own region instead; that choice needs the endpoint and is made where
/// the endpoint is resolved.
pub fn resolve_region(options: &StreamOptions, env: &dyn Fn(&str) -> Option<String>) -> String {
    region_from(options, env, &LazyFiles::new(env))
}

fn region_from(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
    files: &LazyFiles<'_>,
) -> String {
    if let Some(region) = configured_region(options, env) {
        return region;
    }
    if let Some(profile) = selected_profile(options, env) {
        let files = files.get();
        let from = |file: &SharedFile| -> Option<String> {
            file.profiles.get(&profile)?.get("region").filter(|r| !r.is_empty()).cloned()
        };
        if let Some(region) = from(&files.config).or_else(|| from(&files.credentials)) {
            return region;
        }
    }
    DEFAULT_REGION.to_owned()
}

/// Picks the request's authentication: see the module docs for the order.
///
/// # Errors
///
/// [`ErrorKind::Auth`] when no source has usable credentials; the message lists every
/// source tried and why each failed, and never a secret.
pub fn resolve_auth(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Auth, Error> {
    resolve_static(options, env)?.map_err(|missing| missing.error(None))
}

/// Why the key, the environment and the profile's static keys gave no credentials: the
/// sources tried, and the region a further source would sign for.
#[derive(Debug)]
pub(crate) struct Missing {
    /// Each source tried and what it lacked (never a value).
    pub(crate) tried: Vec<String>,
    /// The signing region.
    #[cfg_attr(
        not(feature = "aws-config"),
        expect(dead_code, reason = "only the default chain signs with it")
    )]
    pub(crate) region: String,
}

impl Missing {
    /// The error that says so; `chain` is why the default credential chain found nothing
    /// either, when it was asked.
    pub(crate) fn error(self, chain: Option<&str>) -> Error {
        let tried = self.tried.join("; ");
        let message = match chain {
            None => format!(
                "Could not load AWS credentials for Bedrock. Tried: {tried}. SSO, assume-role, \
                 credential_process, web identity, container and instance (IMDS) credentials \
                 need the `aws-config` feature: set {BEARER_TOKEN_ENV}, or AWS_ACCESS_KEY_ID \
                 and AWS_SECRET_ACCESS_KEY, or static keys in the profile."
            ),
            Some(chain) => format!(
                "Could not load AWS credentials for Bedrock. Tried: {tried}; then the default \
                 credential chain (SSO, assume-role, credential_process, web identity, \
                 container, instance metadata): {chain}."
            ),
        };
        Error::new(ErrorKind::Auth, PROVIDER, message).with_retryable(false)
    }
}

/// [`resolve_auth`] up to the profile's static keys: `Ok(Err(missing))` when none of them
/// gave credentials (a caller with more sources asks those next).
pub(crate) fn resolve_static(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Result<Auth, Missing>, Error> {
    let skip_auth = env(SKIP_AUTH_ENV).as_deref() == Some("1");
    let bearer = options
        .api_key
        .clone()
        .filter(|key| !key.expose().is_empty())
        .or_else(|| var(env, BEARER_TOKEN_ENV).map(ApiKey::new));
    if let Some(key) = bearer
        && !skip_auth
    {
        return Ok(Ok(Auth::Bearer(key)));
    }
    // The shared files are read at most once per resolution.
    let files = LazyFiles::new(env);
    let region = region_from(options, env, &files);
    if skip_auth {
        let credentials = AwsCredentials::from_source(
            "dummy-access-key".to_owned(),
            "dummy-secret-key".to_owned(),
            None,
            CredentialSource::SkipAuth,
        );
        return Ok(Ok(Auth::SigV4 { credentials, region }));
    }
    Ok(match resolve_credentials(options, env, &files) {
        Ok(credentials) => Ok(Auth::SigV4 { credentials, region }),
        Err(tried) => Err(Missing { tried, region }),
    })
}

/// The credential chain of step 3 (module docs), or every source tried and why it failed.
fn resolve_credentials(
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
    files: &LazyFiles<'_>,
) -> Result<AwsCredentials, Vec<String>> {
    let profile = selected_profile(options, env);
    let mut tried = Vec::new();
    if profile.is_none() {
        let id = var(env, "AWS_ACCESS_KEY_ID");
        let secret = var(env, "AWS_SECRET_ACCESS_KEY");
        match (id, secret) {
            (Some(id), Some(secret)) => {
                return Ok(AwsCredentials::from_source(
                    id,
                    secret,
                    var(env, "AWS_SESSION_TOKEN"),
                    CredentialSource::Environment,
                ));
            }
            (Some(_), None) => tried.push(
                "the environment (AWS_ACCESS_KEY_ID is set, AWS_SECRET_ACCESS_KEY is not)".into(),
            ),
            (None, Some(_)) => tried.push(
                "the environment (AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not)".into(),
            ),
            (None, None) => tried.push(
                "the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set)".into(),
            ),
        }
    } else {
        tried.push("the environment (skipped: a profile is selected)".to_owned());
    }
    let name = profile.unwrap_or_else(|| "default".to_owned());
    match files.get().profile_credentials(&name) {
        Ok(credentials) => return Ok(credentials),
        Err(why) => tried.push(why),
    }
    if cfg!(not(feature = "aws-config")) {
        for (variable, what) in [
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "web identity"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "container"),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "container"),
        ] {
            if var(env, variable).is_some() {
                tried.push(format!("{what} credentials ({variable} is set: not supported)"));
            }
        }
    }
    Err(tried)
}

/// Adds the authentication headers to the final request (its URL, headers and body must not
/// change afterwards: the signature covers them). Earlier `authorization`, `x-amz-date`,
/// `x-amz-content-sha256` and `x-amz-security-token` headers are replaced. `now` is the
/// signing time.
///
/// # Errors
///
/// [`ErrorKind::InvalidRequest`] when the request cannot be signed (a URL without a host, a
/// header that is not valid HTTP); the message never contains a secret.
pub fn apply(auth: &Auth, request: &mut HttpRequest, now: SystemTime) -> Result<(), Error> {
    apply_for_method(auth, "POST", request, now)
}

/// [`apply`] for a request sent with `method` (the control plane's `GetInferenceProfile`
/// is a `GET`, and SigV4 signs the method).
pub(crate) fn apply_for_method(
    auth: &Auth,
    method: &str,
    request: &mut HttpRequest,
    now: SystemTime,
) -> Result<(), Error> {
    const REPLACED: [&str; 4] =
        ["authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"];
    for name in REPLACED {
        request.headers.remove(name);
    }
    match auth {
        Auth::Bearer(key) => insert_header(
            &mut request.headers,
            PROVIDER,
            "authorization",
            &format!("Bearer {}", key.expose()),
        ),
        Auth::SigV4 { credentials, region } => {
            for (name, value) in sign(credentials, region, method, request, now)? {
                insert_header(&mut request.headers, PROVIDER, &name, &value)?;
            }
            Ok(())
        }
    }
}

fn signing_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, format!("Could not sign the request: {what}"))
        .with_retryable(false)
}

/// The SigV4 headers for `request` sent with `method`, computed by `aws-sigv4`.
fn sign(
    credentials: &AwsCredentials,
    region: &str,
    method: &str,
    request: &HttpRequest,
    now: SystemTime,
) -> Result<Vec<(String, String)>, Error> {
    use aws_sigv4::http_request::{
        PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings,
    };

    // aws-sigv4 panics on a URI without a host: reject it here.
    let uri: http::Uri = request.url.parse().map_err(|_| signing_error("the URL is not valid"))?;
    if uri.scheme().is_none() || uri.host().is_none_or(str::is_empty) {
        return Err(signing_error("the URL has no scheme or host"));
    }
    // The headers as sent (one value per name: they were set with `insert_header`).
    let mut sent: Vec<(&str, &str)> = Vec::with_capacity(request.headers.len());
    for (name, value) in &request.headers {
        let value =
            value.to_str().map_err(|_| signing_error(format!("header {name} is not text")))?;
        sent.push((name.as_str(), value));
    }
    let identity = aws_credential_types::Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.expose(),
        credentials.session_token.as_ref().map(|t| t.expose().to_owned()),
        None,
        "clawcall",
    )
    .into();
    let mut settings = SigningSettings::default();
    // The JS SDK sends and signs the payload hash; Bedrock accepts it either way.
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(now)
        .settings(settings)
        .build()
        .map_err(signing_error)?
        .into();
    let signable = SignableRequest::new(
        method,
        request.url.as_str(),
        sent.into_iter(),
        SignableBody::Bytes(&request.body),
    )
    .map_err(signing_error)?;
    let (instructions, _signature) =
        aws_sigv4::http_request::sign(signable, &params).map_err(signing_error)?.into_parts();
    let (headers, _query) = instructions.into_parts();
    Ok(headers.into_iter().map(|h| (h.name().to_owned(), h.value().to_owned())).collect())
}

// ---------------------------------------------------------------------------------------------
// Shared config and credentials files
// ---------------------------------------------------------------------------------------------

/// One parsed shared file: profiles by name, each its keys.
#[derive(Debug, Default)]
struct SharedFile {
    /// The path read (for messages), `None` when no path could be formed (no home directory).
    path: Option<PathBuf>,
    /// Why nothing was read, when nothing was.
    missing: Option<String>,
    profiles: BTreeMap<String, BTreeMap<String, String>>,
}

/// The shared files, read on first use.
struct LazyFiles<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    files: std::cell::OnceCell<SharedFiles>,
}

impl<'a> LazyFiles<'a> {
    fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        LazyFiles { env, files: std::cell::OnceCell::new() }
    }

    fn get(&self) -> &SharedFiles {
        self.files.get_or_init(|| SharedFiles::load(self.env))
    }
}

/// The config and credentials files.
#[derive(Debug)]
struct SharedFiles {
    config: SharedFile,
    credentials: SharedFile,
}

impl SharedFiles {
    fn load(env: &dyn Fn(&str) -> Option<String>) -> SharedFiles {
        let home = var(env, "HOME").or_else(|| var(env, "USERPROFILE")).map(PathBuf::from);
        let path = |variable: &str, default: &str| -> Option<PathBuf> {
            match var(env, variable) {
                Some(p) => match (p.strip_prefix("~/"), &home) {
                    (Some(rest), Some(home)) => Some(home.join(rest)),
                    _ => Some(PathBuf::from(p)),
                },
                None => home.as_ref().map(|h| h.join(".aws").join(default)),
            }
        };
        SharedFiles {
            config: SharedFile::read(path("AWS_CONFIG_FILE", "config"), true),
            credentials: SharedFile::read(
                path("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                false,
            ),
        }
    }

    /// Static keys of profile `name` (credentials file over config file, key by key), or why
    /// there are none.
    fn profile_credentials(&self, name: &str) -> Result<AwsCredentials, String> {
        let describe = |file: &SharedFile| match (&file.path, &file.missing) {
            (None, _) => "no path (no home directory)".to_owned(),
            (Some(path), Some(why)) => format!("{} ({why})", path.display()),
            (Some(path), None) => path.display().to_string(),
        };
        let files = format!("{} and {}", describe(&self.config), describe(&self.credentials));
        let mut keys = BTreeMap::new();
        let mut found = false;
        for file in [&self.config, &self.credentials] {
            if let Some(profile) = file.profiles.get(name) {
                found = true;
                keys.extend(profile.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
        }
        if !found {
            return Err(format!("profile `{name}` (not found in {files})"));
        }
        let unsupported = |what: &str, key: &str| {
            let how = if cfg!(feature = "aws-config") {
                "left to the default chain"
            } else {
                "needs the `aws-config` feature"
            };
            Err(format!("profile `{name}` in {files} (uses {what} through `{key}`: {how})"))
        };
        for (key, what) in
            [("sso_session", "SSO"), ("sso_start_url", "SSO"), ("role_arn", "assume-role")]
        {
            if keys.contains_key(key) {
                return unsupported(what, key);
            }
        }
        let get = |key: &str| keys.get(key).filter(|v| !v.is_empty()).map(|v| (*v).to_owned());
        if let (Some(id), Some(secret)) = (get("aws_access_key_id"), get("aws_secret_access_key")) {
            return Ok(AwsCredentials::from_source(
                id,
                secret,
                get("aws_session_token"),
                CredentialSource::Profile(name.to_owned()),
            ));
        }
        for (key, what) in [
            ("web_identity_token_file", "web identity"),
            ("credential_process", "credential_process"),
        ] {
            if keys.contains_key(key) {
                return unsupported(what, key);
            }
        }
        Err(format!("profile `{name}` in {files} (no aws_access_key_id and aws_secret_access_key)"))
    }
}

impl SharedFile {
    /// Reads and parses `path`; a missing or unreadable file counts as empty (as in the AWS
    /// SDKs), with the reason kept for messages.
    fn read(path: Option<PathBuf>, is_config: bool) -> SharedFile {
        let Some(path) = path else { return SharedFile::default() };
        match std::fs::read_to_string(&path) {
            Ok(text) => SharedFile {
                profiles: profiles(&parse_ini(&text), is_config),
                path: Some(path),
                missing: None,
            },
            Err(e) => SharedFile {
                missing: Some(match e.kind() {
                    std::io::ErrorKind::NotFound => "no such file".to_owned(),
                    kind => format!("unreadable: {kind}"),
                }),
                path: Some(path),
                profiles: BTreeMap::new(),
            },
        }
    }
}

/// The profiles of a parsed file. In the config file a profile is `[profile name]`, or
/// `[default]` (`[profile default]` wins over it); in the credentials file every section is a
/// profile.
fn profiles(
    sections: &BTreeMap<String, BTreeMap<String, String>>,
    is_config: bool,
) -> BTreeMap<String, BTreeMap<String, String>> {
    if !is_config {
        return sections.clone();
    }
    let mut out = BTreeMap::new();
    if let Some(default) = sections.get("default") {
        out.insert("default".to_owned(), default.clone());
    }
    for (section, keys) in sections {
        if let Some(name) = section.strip_prefix("profile.") {
            out.insert(name.to_owned(), keys.clone());
        }
    }
    out
}

/// Section prefixes the AWS SDKs know; `[prefix name]` sections are keyed `prefix.name`.
const SECTION_PREFIXES: [&str; 3] = ["profile", "sso-session", "services"];

/// The key of a section header's name, `None` for a `[prefix name]` with an unknown prefix
/// (ignored, as the SDKs do).
fn section_key(name: &str) -> Option<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if let Some((prefix, rest)) = name.split_once(char::is_whitespace)
        && !prefix.is_empty()
        && prefix.chars().all(word)
    {
        let unquoted = ["\"", "'"]
            .iter()
            .find_map(|q| rest.strip_prefix(q).and_then(|r| r.strip_suffix(q)))
            .unwrap_or(rest);
        let name_char = |c: char| word(c) || "@+.%:/".contains(c);
        if !unquoted.is_empty() && unquoted.chars().all(name_char) {
            return SECTION_PREFIXES.contains(&prefix).then(|| format!("{prefix}.{unquoted}"));
        }
    }
    Some(name.to_owned())
}

/// Parses a shared config or credentials file: sections of `key = value` lines. A `#` or `;`
/// at the start of a line or after whitespace starts a comment; a key with an empty value
/// opens a sub-property block whose indented lines are keyed `key.sub`; later values win.
fn parse_ini(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section: Option<String> = None;
    let mut sub: Option<String> = None;
    for raw in text.lines() {
        let line = strip_comment(raw).trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = section_key(name);
            sub = None;
            continue;
        }
        let Some(current) = &section else { continue };
        let Some((key, value)) = line.split_once('=') else { continue };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            continue;
        }
        if value.is_empty() {
            sub = Some(key.to_owned());
            continue;
        }
        if raw.trim_start().len() == raw.len() {
            sub = None;
        }
        let key = match &sub {
            Some(parent) => format!("{parent}.{key}"),
            None => key.to_owned(),
        };
        sections.entry(current.clone()).or_default().insert(key, value.to_owned());
    }
    sections
}

/// `line` up to a `#` or `;` that starts the line or follows whitespace.
fn strip_comment(line: &str) -> &str {
    let mut previous_is_space = true;
    for (at, c) in line.char_indices() {
        if (c == '#' || c == ';') && previous_is_space {
            return line.get(..at).unwrap_or(line);
        }
        previous_is_space = c.is_whitespace();
    }
    line
}

#[cfg(test)]
mod tests;
