//! One request's attempts.
//!
//! The request is converted once (after the `GetInferenceProfile` lookup, when one is
//! needed), and each attempt authenticates and signs it when it is sent: a retry after a
//! long backoff or stall would otherwise resend a signature AWS rejects as expired (it
//! allows five minutes), and credentials refreshed meanwhile are used at once.
//!
//! A signature rejected for its time (a stale signature, or a local clock that is off; see
//! `error::skew_rejection`) is signed again with the server's clock, taken from the
//! rejection's `Date` header, and sent again, once per request: a server that keeps
//! rejecting is not asked a third time. The offset is kept by the provider, so later
//! requests are signed with the corrected clock from the start.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use llm_core::{Context, Error, Model, StreamOptions};
use llm_http::{ErrorResponse, Exchange, HttpRequest, HttpResponse};

use crate::auth::{self, Auth};
use crate::profile::{self, ProfileTraits};
use crate::{Bedrock, PROVIDER};

/// The signing clock: the local clock plus the offset learned from a server that rejected a
/// signature for its time. Shared by a provider's clones.
#[derive(Clone)]
pub(crate) struct Clock {
    /// Server time minus local time, in milliseconds.
    offset_ms: Arc<AtomicI64>,
    /// The local clock (a fixed one in tests).
    local: fn() -> SystemTime,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { offset_ms: Arc::default(), local: SystemTime::now }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock").field("offset_ms", &self.offset_ms.load(Ordering::Relaxed)).finish()
    }
}

impl Clock {
    /// A clock reading `local` (tests).
    #[cfg(test)]
    pub(crate) fn with_local(local: fn() -> SystemTime) -> Self {
        Clock { offset_ms: Arc::default(), local }
    }

    /// The time to sign with.
    pub(crate) fn now(&self) -> SystemTime {
        let local = (self.local)();
        let offset = self.offset_ms.load(Ordering::Relaxed);
        let magnitude = Duration::from_millis(offset.unsigned_abs());
        let adjusted =
            if offset >= 0 { local.checked_add(magnitude) } else { local.checked_sub(magnitude) };
        adjusted.unwrap_or(local)
    }

    /// Learns the offset from `server`, the server's time now.
    pub(crate) fn learn(&self, server: SystemTime) {
        let local = (self.local)();
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let offset = match server.duration_since(local) {
            Ok(ahead) => millis(ahead),
            Err(behind) => -millis(behind.duration()),
        };
        self.offset_ms.store(offset, Ordering::Relaxed);
    }

    /// The learned offset in milliseconds (server minus local).
    pub(crate) fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

/// The converted request, not signed yet, and the region it is signed for.
#[derive(Debug)]
pub(crate) struct Unsigned {
    pub(crate) http: HttpRequest,
    pub(crate) region: String,
}

/// Converts and serializes the request (no authentication: each attempt adds its own).
pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
    profile: Option<ProfileTraits>,
) -> Result<Unsigned, Error> {
    // A profile's own region is read from the shared config only when a profile is selected.
    let profile_region =
        auth::selected_profile(options, env).map(|_| auth::resolve_region(options, env));
    crate::convert::build_request_with(model, context, options, env, profile_region, profile)
}

/// `unsigned` signed with `auth` (SigV4 for the request's own region: a pinned standard
/// endpoint signs for its region) at `now`.
pub(crate) fn sign(
    unsigned: &Unsigned,
    mut auth: Auth,
    now: SystemTime,
) -> Result<HttpRequest, Error> {
    if let Auth::SigV4 { region, .. } = &mut auth {
        region.clone_from(&unsigned.region);
    }
    let mut http = unsigned.http.clone();
    auth::apply(&auth, &mut http, now)?;
    Ok(http)
}

/// One request as prepared: what its attempts share.
pub struct Call {
    pub(crate) model: Model,
    pub(crate) context: Context,
    pub(crate) options: StreamOptions,
    /// The application profile to ask `GetInferenceProfile` about before converting.
    pub(crate) lookup: Option<String>,
    /// The converted request, once converted.
    pub(crate) unsigned: Mutex<Option<Arc<Unsigned>>>,
    /// Whether this request already signed again after a clock-skew rejection.
    pub(crate) skew_corrected: AtomicBool,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("model", &self.model.id)
            .field("lookup", &self.lookup)
            .finish_non_exhaustive()
    }
}

impl Call {
    /// One attempt: convert (first time), authenticate, sign now, send; once per request, a
    /// rejection for the signature's time is signed again with the server's clock and sent.
    pub(crate) async fn attempt(
        &self,
        wire: &Bedrock,
        exchange: &Exchange,
    ) -> Result<HttpResponse, Error> {
        let unsigned = self.unsigned(wire, exchange).await?;
        let auth = self.auth(wire, exchange).await?;
        let signs = matches!(auth, Auth::SigV4 { .. });
        match self.send(wire, exchange, &unsigned, auth.clone()).await {
            Err((_, Some(server)))
                if signs && !self.skew_corrected.swap(true, Ordering::SeqCst) =>
            {
                wire.clock.learn(server);
                tracing::warn!(
                    provider = PROVIDER,
                    offset_ms = wire.clock.offset_ms(),
                    "signature rejected for its time; signing again with the server's clock"
                );
                self.send(wire, exchange, &unsigned, auth).await.map_err(|(error, _)| error)
            }
            result => result.map_err(|(error, _)| error),
        }
    }

    /// The authentication of this attempt (resolved again per attempt: rotated keys and
    /// refreshed credentials apply).
    async fn auth(&self, wire: &Bedrock, exchange: &Exchange) -> Result<Auth, Error> {
        let env = |name: &str| exchange.env().get(name);
        let missing = match auth::resolve_static(&self.options, &env)? {
            Ok(auth) => return Ok(auth),
            Err(missing) => missing,
        };
        #[cfg(feature = "aws-config")]
        return wire
            .credentials
            .resolve(&exchange.client()?, &self.options, exchange.env(), missing)
            .await;
        #[cfg(not(feature = "aws-config"))]
        {
            let _ = wire;
            Err(missing.error(None))
        }
    }

    /// Signs `unsigned` now and sends it; an error comes with the server's time when it
    /// rejected the signature for its time.
    async fn send(
        &self,
        wire: &Bedrock,
        exchange: &Exchange,
        unsigned: &Unsigned,
        auth: Auth,
    ) -> Result<HttpResponse, (Error, Option<SystemTime>)> {
        let now = wire.clock.now();
        let signed = sign(unsigned, auth, now).map_err(|e| (e, None))?;
        let skew: Arc<Mutex<Option<SystemTime>>> = Arc::default();
        let seen = Arc::clone(&skew);
        let map_error = move |response: ErrorResponse| {
            *seen.lock().unwrap_or_else(PoisonError::into_inner) =
                crate::error::skew_rejection(&response, now);
            crate::error::http_error(response)
        };
        exchange
            .send(Arc::new(signed), map_error)
            .await
            .map_err(|error| (error, skew.lock().unwrap_or_else(PoisonError::into_inner).take()))
    }

    /// The converted request: converted on the first attempt (after asking
    /// `GetInferenceProfile` when needed), then reused.
    async fn unsigned(&self, wire: &Bedrock, exchange: &Exchange) -> Result<Arc<Unsigned>, Error> {
        if let Some(ready) = self.unsigned.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            return Ok(ready);
        }
        let profile = match &self.lookup {
            Some(arn) => self.ask_profile(wire, exchange, arn).await,
            None => None,
        };
        let env = |name: &str| exchange.env().get(name);
        let unsigned = Arc::new(build(&self.model, &self.context, &self.options, &env, profile)?);
        *self.unsigned.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&unsigned));
        Ok(unsigned)
    }

    /// What `GetInferenceProfile` says about `arn` (cached on success; a concurrent request
    /// for the same ARN waits for this lookup instead of sending its own), `None` when the
    /// lookup failed or the ARN still waits after a failure (the heuristic decides).
    async fn ask_profile(
        &self,
        wire: &Bedrock,
        exchange: &Exchange,
        arn: &str,
    ) -> Option<ProfileTraits> {
        let profiles = &wire.profiles;
        let cell = profiles.cell(arn);
        if let Some(known) = cell.get() {
            return Some(*known);
        }
        let answer = cell
            .get_or_try_init(|| async {
                if profiles.waiting(arn) {
                    return Err(None);
                }
                let answer = self.lookup_profile(wire, exchange).await;
                match answer {
                    Ok(traits) => {
                        profiles.succeeded(arn);
                        Ok(traits)
                    }
                    Err(error) => {
                        profiles.failed(arn);
                        Err(Some(error))
                    }
                }
            })
            .await;
        match answer {
            Ok(traits) => Some(*traits),
            Err(Some(error)) => {
                tracing::warn!(
                    provider = PROVIDER,
                    error = %error.message,
                    "GetInferenceProfile failed; deciding cache points from the profile name"
                );
                None
            }
            Err(None) => None,
        }
    }

    /// Asks `GetInferenceProfile`, signed like the runtime request, within the lookup bound.
    async fn lookup_profile(
        &self,
        wire: &Bedrock,
        exchange: &Exchange,
    ) -> Result<ProfileTraits, Error> {
        let env = |name: &str| exchange.env().get(name);
        let (request, region) = profile::unsigned_lookup_request(&self.model, &self.options, &env)?;
        let auth = self.auth(wire, exchange).await?;
        let signed = profile::sign_lookup_request(request, &region, auth, wire.clock.now())?;
        let body = exchange
            .fetch(
                &signed,
                "GetInferenceProfile",
                wire.profiles.timeout,
                profile::MAX_PROFILE_BYTES,
            )
            .await?;
        profile::traits(&body)
    }
}

#[cfg(test)]
mod tests;
