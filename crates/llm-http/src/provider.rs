//! Being a provider: a crate implements [`HttpWire`] (its request conversion, its decoder
//! and its error table) or, when an attempt must do more than send that request,
//! [`WireFormat`]; [`HttpProvider`] makes either an [`llm_core::Provider`], built by one
//! [`ProviderBuilder`].
//!
//! A [`WireFormat`] says how to prepare a request ([`WireFormat::prepare`], once per
//! request, pure), what each attempt sends ([`WireFormat::attempt`], async: an attempt may
//! sign the request now or ask another endpoint first), which decoder reads the answer
//! ([`WireFormat::decoder`]) and how an error status maps (the function it hands to
//! [`Exchange::send`]); every [`HttpWire`] is one whose attempts send the converted request.
//! Everything else is here once: the transport and its clients, the environment, the driver
//! (retries, timeouts, cancellation, framing).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::raw::drive::{HttpResponse, StreamDecoder};
use llm_core::{
    AssistantStream, Capabilities, Context, Error, ErrorKind, Model, Provider, ProviderInfo,
    StreamOptions,
};

use crate::{Env, ErrorResponse, HttpRequest, HttpTransport, TransportConfig};

/// One API spoken over HTTP whose attempts do more than send one converted request (sign it
/// now, look something up first); every [`HttpWire`] is one.
pub trait WireFormat: fmt::Debug + Send + Sync + 'static {
    /// The decoder of the answer (its framing comes with it).
    type Decoder: StreamDecoder;
    /// One request as prepared: what its attempts send and what its decoder needs.
    type Call: Send + Sync + 'static;

    /// What the crate declares about itself (its capabilities are this provider's).
    fn info(&self) -> &'static ProviderInfo;

    /// The API id this provider is registered under.
    fn api(&self) -> &str;

    /// The provider name errors of a request for `model` carry.
    fn provider_name(&self, model: &Model) -> String;

    /// Converts a request, once before its first attempt; an error ends the stream at once.
    fn prepare(&self, request: Request<'_>) -> Result<Self::Call, Error>;

    /// One attempt: builds what is sent now and sends it through `exchange`.
    fn attempt(
        &self,
        call: &Arc<Self::Call>,
        exchange: Exchange,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>>;

    /// A fresh decoder for one attempt's answer.
    fn decoder(&self, call: &Self::Call) -> Self::Decoder;
}

/// One API whose every attempt sends the request as converted: what a provider crate
/// implements unless its attempts sign or look something up ([`WireFormat`] then). Every
/// `HttpWire` is a [`WireFormat`].
pub trait HttpWire: fmt::Debug + Send + Sync + 'static {
    /// The decoder of the answer (its framing comes with it).
    type Decoder: StreamDecoder;
    /// What the decoder and the error mapping need of one request (`()` when nothing).
    type State: Send + Sync + 'static;

    /// What the crate declares about itself, as [`WireFormat::info`].
    fn info(&self) -> &'static ProviderInfo;

    /// The API id this provider is registered under (default: `info().api`).
    fn api(&self) -> &str {
        self.info().api
    }

    /// The provider name errors of a request for `model` carry (default: `info().provider`).
    fn provider_name(&self, model: &Model) -> String {
        let _ = model;
        self.info().provider.to_owned()
    }

    /// Converts a request, once before its first attempt; an error ends the stream at once.
    fn convert(&self, request: Request<'_>) -> Result<Converted<Self::State>, Error>;

    /// A fresh decoder for one attempt's answer.
    fn decoder(&self, state: &Self::State) -> Self::Decoder;

    /// The error of an attempt answered with an error status.
    fn error(state: &Self::State, response: ErrorResponse) -> Error;
}

/// A request as [`HttpWire::convert`] made it: what every attempt sends, and what its
/// decoder and error mapping need.
#[derive(Debug)]
pub struct Converted<S> {
    /// What every attempt sends.
    pub http: Arc<HttpRequest>,
    /// What the decoder and the error mapping need.
    pub state: S,
}

impl<S> Converted<S> {
    /// `http`, sent by every attempt, with `state`.
    pub fn new(http: HttpRequest, state: S) -> Self {
        Converted { http: Arc::new(http), state }
    }
}

impl<W: HttpWire> WireFormat for W {
    type Decoder = W::Decoder;
    type Call = Converted<W::State>;

    fn info(&self) -> &'static ProviderInfo {
        HttpWire::info(self)
    }

    fn api(&self) -> &str {
        HttpWire::api(self)
    }

    fn provider_name(&self, model: &Model) -> String {
        HttpWire::provider_name(self, model)
    }

    fn prepare(&self, request: Request<'_>) -> Result<Self::Call, Error> {
        self.convert(request)
    }

    fn attempt(
        &self,
        call: &Arc<Self::Call>,
        exchange: Exchange,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>> {
        let for_errors = Arc::clone(call);
        exchange.send(Arc::clone(&call.http), move |response| W::error(&for_errors.state, response))
    }

    fn decoder(&self, call: &Self::Call) -> Self::Decoder {
        HttpWire::decoder(self, &call.state)
    }
}

/// What [`WireFormat::prepare`] converts.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The model.
    pub model: &'a Model,
    /// The conversation and tools.
    pub context: &'a Context,
    /// The request options.
    pub options: &'a StreamOptions,
    /// The provider's environment.
    pub env: &'a Env,
}

/// What one attempt sends through: the provider's transport, for this request's options.
#[derive(Debug, Clone)]
pub struct Exchange {
    transport: HttpTransport,
    config: TransportConfig,
    provider: Arc<str>,
    env: Env,
    attempt: u32,
}

impl Exchange {
    /// The attempt's number (0-based).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The provider name errors carry.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The provider's environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// This exchange, speaking only HTTP/1.1 ([`HttpTransport::http1_only`]).
    #[must_use]
    pub fn http1_only(mut self) -> Self {
        self.transport = self.transport.http1_only();
        self
    }

    /// A reqwest client for this exchange's configuration, for code that needs one of its own
    /// (AWS's credential chain); requests go through [`HttpTransport::send`](crate::HttpTransport::send).
    pub fn client(&self) -> Result<reqwest::Client, Error> {
        self.transport.client(self.config, &self.provider).map_err(|e| e.with_retryable(false))
    }

    /// Sends `request`; an error status is mapped by `map_error` ([`crate::send`]).
    pub fn send<M>(
        &self,
        request: Arc<HttpRequest>,
        map_error: M,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>>
    where
        M: Fn(ErrorResponse) -> Error + Send + Sync + 'static,
    {
        let provider = Arc::clone(&self.provider);
        let (transport, config) = (self.transport.clone(), self.config);
        // The first client of the process has its roots read off the async worker.
        let load_roots = !(crate::platform_roots_loaded() || transport.has_client(config));
        Box::pin(async move {
            if load_roots {
                crate::load_platform_roots().await;
            }
            transport.send(config, request, provider, Arc::new(map_error)).await
        })
    }

    /// Sends `request` and reads a whole 2xx body of at most `max_bytes` within `timeout`,
    /// for a small side request (a lookup before the real one). `what` names it in errors;
    /// an error status is a `provider` error with that status.
    pub async fn fetch(
        &self,
        request: &HttpRequest,
        what: &str,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Bytes, Error> {
        let provider = Arc::clone(&self.provider);
        let what: Arc<str> = what.into();
        let named = Arc::clone(&what);
        let map_error = move |response: ErrorResponse| {
            Error::new(
                ErrorKind::Provider,
                &*provider,
                format!("{named} returned HTTP {}", response.status),
            )
            .with_status(response.status)
        };
        let fetch = async {
            let response = self.send(Arc::new(request.clone()), map_error).await?;
            let mut body = response.body;
            let mut bytes = Vec::new();
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                if bytes.len() + chunk.len() > max_bytes {
                    return Err(Error::new(
                        ErrorKind::Decode,
                        &*self.provider,
                        format!("{what} answered more than {max_bytes} bytes"),
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(Bytes::from(bytes))
        };
        match tokio::time::timeout(timeout, fetch).await {
            Ok(result) => result,
            Err(_) => Err(Error::new(
                ErrorKind::Transport,
                &*self.provider,
                format!("{what} timed out after {} ms", timeout.as_millis()),
            )),
        }
    }
}

/// An [`llm_core::Provider`] speaking the API `W` over HTTP.
///
/// Cheap to clone; clones share the HTTP clients and whatever the wire format keeps.
pub struct HttpProvider<W> {
    wire: Arc<W>,
    http: HttpTransport,
    env: Env,
}

impl<W> Clone for HttpProvider<W> {
    fn clone(&self) -> Self {
        HttpProvider {
            wire: Arc::clone(&self.wire),
            http: self.http.clone(),
            env: self.env.clone(),
        }
    }
}

impl<W: fmt::Debug> fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("wire", &self.wire)
            .field("http", &self.http)
            .field("env", &self.env)
            .finish()
    }
}

impl<W: WireFormat + Default> Default for HttpProvider<W> {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl<W: WireFormat + Default> HttpProvider<W> {
    /// The provider with its own HTTP clients (rustls; one per connect timeout), reading the
    /// process environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder starting from the default wire format.
    pub fn builder() -> ProviderBuilder<W> {
        ProviderBuilder { wire: W::default(), http: HttpTransport::new(), env: Env::Process }
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// The wire format.
    pub fn wire(&self) -> &W {
        &self.wire
    }
}

/// Builds an [`HttpProvider`]: its wire format's settings, its HTTP clients and its
/// environment.
#[derive(Debug)]
#[must_use]
pub struct ProviderBuilder<W> {
    wire: W,
    http: HttpTransport,
    env: Env,
}

impl<W: WireFormat> ProviderBuilder<W> {
    /// A builder for `wire`.
    pub fn new(wire: W) -> Self {
        ProviderBuilder { wire, http: HttpTransport::new(), env: Env::Process }
    }

    /// Speaks `wire` (a wire format's variant or settings: Vertex AI, Azure, lookups).
    pub fn wire(mut self, wire: W) -> Self {
        self.wire = wire;
        self
    }

    /// Sends every request with `client` (proxies, custom TLS, pools; that client's own
    /// connect timeout applies).
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = HttpTransport::with_client(client);
        self
    }

    /// Sends through `transport` (shared clients, extra roots, HTTP/1.1 only).
    pub fn transport(mut self, transport: HttpTransport) -> Self {
        self.http = transport;
        self
    }

    /// Reads environment variables from `vars` instead of the process (several differently
    /// configured providers in one process; tests that must not change the process's).
    pub fn env<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.env = Env::vars(vars);
        self
    }

    /// The provider.
    pub fn build(self) -> HttpProvider<W> {
        HttpProvider { wire: Arc::new(self.wire), http: self.http, env: self.env }
    }
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn api(&self) -> &str {
        self.wire.api()
    }

    fn capabilities(&self) -> Capabilities {
        self.wire.info().capabilities
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let provider = self.wire.provider_name(model);
        let request = Request { model, context, options, env: &self.env };
        let call = match self.wire.prepare(request) {
            Ok(call) => Arc::new(call),
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let exchange = Exchange {
            transport: self.http.clone(),
            config: TransportConfig::from_options(options),
            provider: provider.as_str().into(),
            env: self.env.clone(),
            attempt: 0,
        };
        let (wire, decoding) = (Arc::clone(&self.wire), Arc::clone(&self.wire));
        let decoder_call = Arc::clone(&call);
        llm_core::raw::drive::drive(
            model,
            options,
            &provider,
            move |attempt| wire.attempt(&call, Exchange { attempt, ..exchange.clone() }),
            move || decoding.decoder(&decoder_call),
        )
    }
}
