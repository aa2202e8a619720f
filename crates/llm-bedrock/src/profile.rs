//! Application inference profiles.
//!
//! An `arn:aws(-cn|-us-gov)?:bedrock:<region>:<account>:application-inference-profile/<id>`
//! model id hides which models it routes to, so the name-based cache heuristic
//! cannot tell whether cache points are allowed. For such an opaque id, when cache points
//! are wanted, the control plane's `GetInferenceProfile` is asked once: cache points go in
//! only if every routed `modelArn` names a model that caches. A successful answer is kept
//! per ARN (shared by the provider's clones). A failed one makes that ARN wait before it is
//! asked again ([`DEFAULT_LOOKUP_BACKOFF`], doubling per failure up to sixteen times that),
//! and requests meanwhile use the heuristic without asking: a control plane that is down
//! or denies the call is not asked once per request. At most [`MAX_PROFILES`] ARNs are
//! remembered; the least recently used is forgotten first.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use llm_core::{CacheRetention, Error, ErrorKind, Model, StreamOptions};
use llm_http::HttpRequest;
use serde::Deserialize;
use tokio::sync::OnceCell;

use crate::PROVIDER;
use crate::auth::{self, Auth};
use crate::convert::{self, BedrockCompat, BedrockOptions, ClaudeTraits, Env};

/// How long a `GetInferenceProfile` call may take before the request goes on without it.
pub const DEFAULT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an ARN whose lookup failed waits before it is asked again (doubled per
/// further failure, up to sixteen times this).
pub const DEFAULT_LOOKUP_BACKOFF: Duration = Duration::from_secs(30);

/// How many application inference profiles a provider remembers.
pub const MAX_PROFILES: usize = 256;

/// The largest profile description read; a profile is a few hundred bytes.
pub(crate) const MAX_PROFILE_BYTES: usize = 1 << 20;

/// What `GetInferenceProfile` says about the models an application inference profile routes
/// to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProfileTraits {
    /// Every routed model caches: cache points are sent.
    pub(crate) caching: bool,
    /// Some routed model rejects `temperature` (Opus 4.7/4.8, Fable 5, Mythos Preview): it
    /// is not sent, whichever model the profile picks.
    pub(crate) rejects_temperature: bool,
}

/// What `GetInferenceProfile` said per profile ARN, and which ARNs wait after a failure.
///
/// One cell per ARN: concurrent first requests wait for one lookup; a failed (or cancelled)
/// lookup leaves the cell empty.
#[derive(Clone)]
pub(crate) struct ProfileCache {
    known: Arc<Mutex<Known>>,
    /// The bound on one lookup.
    pub(crate) timeout: Duration,
    /// The wait after a first failure.
    pub(crate) backoff: Duration,
    /// How many ARNs are remembered.
    pub(crate) capacity: usize,
}

#[derive(Default)]
struct Known {
    entries: HashMap<String, Entry>,
    /// Increases on every use: the entry with the smallest `used` is the least recent.
    clock: u64,
}

struct Entry {
    cell: Arc<OnceCell<ProfileTraits>>,
    /// Failed lookups since the last success.
    failures: u32,
    /// No lookup before this, after a failure.
    retry_at: Option<Instant>,
    used: u64,
}

impl Known {
    /// The entry of `arn`, created (forgetting the least recently used entry when `capacity`
    /// is reached) if absent, and marked used.
    fn entry(&mut self, arn: &str, capacity: usize) -> &mut Entry {
        self.clock += 1;
        let used = self.clock;
        if !self.entries.contains_key(arn) && self.entries.len() >= capacity.max(1) {
            let oldest = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        let entry = self.entries.entry(arn.to_owned()).or_insert_with(|| Entry {
            cell: Arc::default(),
            failures: 0,
            retry_at: None,
            used,
        });
        entry.used = used;
        entry
    }
}

impl Default for ProfileCache {
    fn default() -> Self {
        ProfileCache {
            known: Arc::default(),
            timeout: DEFAULT_LOOKUP_TIMEOUT,
            backoff: DEFAULT_LOOKUP_BACKOFF,
            capacity: MAX_PROFILES,
        }
    }
}

impl fmt::Debug for ProfileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known = self.lock();
        let answers = known.entries.values().filter(|e| e.cell.initialized()).count();
        let waiting = known.entries.values().filter(|e| e.retry_at.is_some()).count();
        f.debug_struct("ProfileCache")
            .field("known_profiles", &answers)
            .field("failed_profiles", &waiting)
            .field("timeout", &self.timeout)
            .field("backoff", &self.backoff)
            .finish()
    }
}

impl ProfileCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached answer for `arn`.
    pub(crate) fn get(&self, arn: &str) -> Option<ProfileTraits> {
        let mut known = self.lock();
        if !known.entries.contains_key(arn) {
            return None;
        }
        known.entry(arn, self.capacity).cell.get().copied()
    }

    /// The cell holding `arn`'s answer once a lookup succeeds.
    pub(crate) fn cell(&self, arn: &str) -> Arc<OnceCell<ProfileTraits>> {
        Arc::clone(&self.lock().entry(arn, self.capacity).cell)
    }

    /// Whether `arn` failed lately and waits before it is asked again.
    pub(crate) fn waiting(&self, arn: &str) -> bool {
        let known = self.lock();
        known.entries.get(arn).and_then(|e| e.retry_at).is_some_and(|at| Instant::now() < at)
    }

    /// Records a failed lookup of `arn`: it waits [`ProfileCache::backoff`], doubled for
    /// each failure before this one since the last success, at most sixteen times.
    pub(crate) fn failed(&self, arn: &str) {
        let backoff = self.backoff;
        let mut known = self.lock();
        let entry = known.entry(arn, self.capacity);
        entry.failures = entry.failures.saturating_add(1);
        let factor = 1u32 << entry.failures.saturating_sub(1).min(4);
        entry.retry_at = Instant::now().checked_add(backoff.saturating_mul(factor));
    }

    /// Records a successful lookup of `arn` (its answer is in its cell).
    pub(crate) fn succeeded(&self, arn: &str) {
        let mut known = self.lock();
        let entry = known.entry(arn, self.capacity);
        entry.failures = 0;
        entry.retry_at = None;
    }

    /// How many ARNs are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// The fields of an `arn:aws(-cn|-us-gov)?:bedrock:<region>:<account>:application-inference-profile/<id>`
/// id: its region (field 4, possibly empty).
fn app_profile_region(id: &str) -> Option<&str> {
    let mut fields = id.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("bedrock"), Some(region), Some(_account), Some(rest)) =
        (fields.next(), fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return None;
    };
    let known_partition = matches!(partition, "aws" | "aws-cn" | "aws-us-gov");
    let profile = rest.strip_prefix("application-inference-profile/")?;
    (known_partition && !profile.is_empty()).then_some(region)
}

/// The profile ARN to look up before `model`'s request is built: an application-profile
/// id, cache points wanted (retention not `none`), and neither the name heuristic nor a
/// forced cache already allows them. `None` for every other request (and for options or a
/// compat that do not parse: building the request reports that error).
pub(crate) fn lookup_target<'m>(
    model: &'m Model,
    options: &StreamOptions,
    env: Env<'_>,
) -> Option<&'m str> {
    if options.cache_retention == CacheRetention::None || app_profile_region(&model.id).is_none() {
        return None;
    }
    let extra = BedrockOptions::from_options(options).ok()?;
    let compat = BedrockCompat::from_model(model).ok()?;
    let decided = ClaudeTraits::of(model, &compat).caching || convert::forces_cache(&extra, env);
    (!decided).then_some(model.id.as_str())
}

/// The `GET /inference-profiles/<arn>` for `model` (whose id [`lookup_target`] returned),
/// not signed yet, and the region to sign it for. It goes to the `controlPlaneUrl` option,
/// else the control plane of the ARN's region (else the request's region), signed for that
/// region like the runtime request.
pub(crate) fn unsigned_lookup_request(
    model: &Model,
    options: &StreamOptions,
    env: Env<'_>,
) -> Result<(HttpRequest, String), Error> {
    let extra = BedrockOptions::from_options(options)?;
    let region = match app_profile_region(&model.id).filter(|r| !r.is_empty()) {
        Some(region) => region.to_owned(),
        None => {
            let profile_region =
                auth::selected_profile(options, env).map(|_| auth::resolve_region(options, env));
            convert::resolve_endpoint(model, options, env, profile_region).region
        }
    };
    let base = match extra.control_plane_url.as_deref().map(str::trim) {
        Some(url) if !url.is_empty() => url.trim_end_matches('/').to_owned(),
        _ => convert::control_plane_endpoint(&region, convert::uses_fips(env)),
    };
    let url = format!("{base}{}", convert::inference_profile_path(&model.id));
    let request =
        HttpRequest::get(url, llm_http::header_map(PROVIDER, [("accept", "application/json")])?);
    Ok((request, region))
}

/// Signs a lookup request from [`unsigned_lookup_request`] with `auth` (SigV4 for
/// `region`) at `now`.
pub(crate) fn sign_lookup_request(
    mut request: HttpRequest,
    region: &str,
    mut auth: Auth,
    now: SystemTime,
) -> Result<HttpRequest, Error> {
    if let Auth::SigV4 { region: signing, .. } = &mut auth {
        region.clone_into(signing);
    }
    auth::apply_for_method(&auth, "GET", &mut request, now)?;
    Ok(request)
}

/// The signed `GET /inference-profiles/<arn>` for `model`, signed now with the options'
/// and environment's authentication.
#[cfg(test)]
pub(crate) fn lookup_request(
    model: &Model,
    options: &StreamOptions,
    env: Env<'_>,
) -> Result<HttpRequest, Error> {
    let (request, region) = unsigned_lookup_request(model, options, env)?;
    sign_lookup_request(request, &region, auth::resolve_auth(options, env)?, SystemTime::now())
}

/// What the models a profile routes to have in common (see [`ProfileTraits`]), from
/// `GetInferenceProfile`'s answer.
///
/// # Errors
///
/// A body that is not a profile: the caller falls back to the heuristic and does not cache
/// the failure.
pub(crate) fn traits(body: &[u8]) -> Result<ProfileTraits, Error> {
    let profile: InferenceProfile = serde_json::from_slice(body).map_err(|e| {
        Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid GetInferenceProfile answer: {e}"))
    })?;
    Ok(ProfileTraits {
        caching: profile.routes_only_to_caching_models(),
        rejects_temperature: profile.routes_to_a_model_rejecting_temperature(),
    })
}

/// The part of `GetInferenceProfile`'s answer this crate reads.
#[derive(Debug, Deserialize)]
struct InferenceProfile {
    models: Vec<ProfileModel>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProfileModel {
    model_arn: String,
}

impl InferenceProfile {
    /// Every routed model caches by its id (a profile routing to no model does not: there
    /// is nothing to say it caches).
    fn routes_only_to_caching_models(&self) -> bool {
        !self.models.is_empty()
            && self.models.iter().all(|m| model_arn_traits(&m.model_arn).caching)
    }

    /// Some routed model rejects `temperature` (OpenClaw drops it then): the
    /// profile may send the request to that model.
    fn routes_to_a_model_rejecting_temperature(&self) -> bool {
        self.models.iter().any(|m| model_arn_traits(&m.model_arn).rejects_temperature)
    }
}

/// The traits of the model a `modelArn` names (`…:foundation-model/<id>` or a system profile
/// `…:inference-profile/<id>`).
fn model_arn_traits(model_arn: &str) -> ClaudeTraits {
    let id = model_arn.rsplit_once('/').map_or(model_arn, |(_, id)| id);
    ClaudeTraits::of(&Model { id: id.to_owned(), ..Model::default() }, &BedrockCompat::default())
}

#[cfg(test)]
mod tests;
