//! Where a request goes: the endpoint, the signing region and the
//! `/model/<id>/converse-stream` path with the model id percent-encoded.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters is encoded, as the AWS SDK's
/// `extendedEncodeURIComponent` does: `:` -> `%3A`, `/` -> `%2F`.
const PATH_SEGMENT: &AsciiSet =
    &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

use crate::auth::DEFAULT_REGION;

/// Where to send the request and which region signs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Scheme, host and any path prefix, without a trailing `/`.
    pub(crate) base: String,
    /// The region SigV4 signs for.
    pub(crate) region: String,
    /// Whether `base` is the model's base URL (a custom endpoint, or a standard one
    /// nothing overrides) rather than the standard endpoint of `region`.
    pub(crate) pinned: bool,
}

/// The inputs of [`Endpoint::resolve`], read from options and the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EndpointInputs<'a> {
    /// `model.base_url` (empty: the standard endpoint).
    pub(crate) base_url: &'a str,
    /// The `region` provider option, else `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub(crate) configured_region: Option<String>,
    /// The region of the selected profile's shared config, when a profile is selected.
    pub(crate) profile_region: Option<String>,
    /// A profile is selected (`profile` option or `AWS_PROFILE`).
    pub(crate) has_profile: bool,
    /// `AWS_USE_FIPS_ENDPOINT=true`.
    pub(crate) fips: bool,
}

impl Endpoint {
    /// A custom (non-runtime) base URL is always used as is; a standard runtime
    /// host only when no region or profile is configured, so a catalogue default URL never
    /// overrides `AWS_REGION` (OpenClaw #3402).
    pub(crate) fn resolve(inputs: &EndpointInputs<'_>) -> Endpoint {
        let base_url = inputs.base_url.trim().trim_end_matches('/');
        let endpoint_region = runtime_host_region(base_url);
        let standard = endpoint_region.is_some();
        let pinned = !base_url.is_empty()
            && (!standard || (inputs.configured_region.is_none() && !inputs.has_profile));
        let region = inputs
            .configured_region
            .clone()
            .or_else(|| if pinned { endpoint_region.clone() } else { None })
            .or_else(|| inputs.profile_region.clone())
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        let base =
            if pinned { base_url.to_owned() } else { standard_endpoint(&region, inputs.fips) };
        Endpoint { base, region, pinned }
    }

    /// The full URL for `model_id`.
    pub(crate) fn url(&self, model_id: &str) -> String {
        format!("{}{}", self.base, model_path(model_id))
    }
}

/// `/model/<percent-encoded id>/converse-stream`.
pub(crate) fn model_path(model_id: &str) -> String {
    format!("/model/{}/converse-stream", utf8_percent_encode(model_id, PATH_SEGMENT))
}

/// `/inference-profiles/<percent-encoded id or ARN>`: the control plane's
/// `GetInferenceProfile` path.
pub(crate) fn inference_profile_path(profile: &str) -> String {
    format!("/inference-profiles/{}", utf8_percent_encode(profile, PATH_SEGMENT))
}

/// `https://bedrock[-fips].<region>.amazonaws.com[.cn]`: the control plane of `region`.
pub(crate) fn control_plane_endpoint(region: &str, fips: bool) -> String {
    let host = if fips { "bedrock-fips" } else { "bedrock" };
    let suffix = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://{host}.{region}.{suffix}")
}

/// `https://bedrock-runtime[-fips].<region>.amazonaws.com[.cn]`.
pub(crate) fn standard_endpoint(region: &str, fips: bool) -> String {
    let host = if fips { "bedrock-runtime-fips" } else { "bedrock-runtime" };
    let suffix = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://{host}.{region}.{suffix}")
}

/// The region of a standard runtime URL: the lower-cased host fully matches
/// `bedrock-runtime(-fips)?.<region>.amazonaws.com(.cn)?`.
pub(crate) fn runtime_host_region(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next().unwrap_or_default().to_ascii_lowercase();
    let host =
        host.strip_suffix(".amazonaws.com.cn").or_else(|| host.strip_suffix(".amazonaws.com"))?;
    let region = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let valid = !region.is_empty()
        && region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid.then(|| region.to_owned())
}
