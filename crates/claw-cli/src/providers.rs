//! The providers `claw` offers: the `clawcall` registry (one entry per provider crate,
//! built from its exported `INFO`), plus claw's own checks of the environment.

/// One provider crate: its metadata, constructors, aliases and secrets.
pub(crate) type Registered = clawcall::ProviderEntry;

/// Every provider `claw --provider` takes; the first is the default.
pub(crate) const PROVIDERS: &[Registered] = clawcall::PROVIDERS;

/// A provider's check of its environment (see [`PREFLIGHT`]).
pub(crate) type Preflight = fn(&llm_core::Model, &llm_core::StreamOptions) -> Result<(), String>;

/// Checks a provider crate can run with what the environment gives it, before
/// any request: `(INFO.name, check)`. A failure names the variables to set.
pub(crate) const PREFLIGHT: &[(&str, Preflight)] = &[
    ("bedrock", |_, options| {
        llm_bedrock::auth::resolve_auth(options, &|name| std::env::var(name).ok())
            .map(|_| ())
            .map_err(|e| e.message)
    }),
    ("azure-openai-responses", |model, _| {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        if model.base_url.trim().is_empty()
            && !set("AZURE_OPENAI_BASE_URL")
            && !set("AZURE_OPENAI_RESOURCE_NAME")
        {
            return Err(
                "Azure OpenAI needs its endpoint: set AZURE_OPENAI_BASE_URL (or AZURE_OPENAI_RESOURCE_NAME), or pass --base-url"
                    .to_owned(),
            );
        }
        Ok(())
    }),
];
