//! Typed tools: a [`Tool`] whose parameters come from a Rust type, and typed
//! access to its (validated) arguments.
//!
//! ```
//! use llm_core::typed::{parse_arguments, tool_for};
//! use llm_core::validation::ValidatorCache;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Weather {
//!     /// City name.
//!     city: String,
//!     days: Option<u8>,
//! }
//!
//! let tool = tool_for::<Weather>("weather", "Forecast for a city");
//! let cache = ValidatorCache::new();
//! let args = cache.validate(&tool, &serde_json::json!({"city": "Paris", "days": "3"})).unwrap();
//! let weather: Weather = parse_arguments("weather", &args).unwrap();
//! assert_eq!(weather.days, Some(3));
//! ```

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types::Tool;

/// A `Tool` whose parameters are derived from `T: schemars::JsonSchema`.
///
/// The root of the schema must be an object schema (`T` a struct, a map, or an
/// enum whose variants are objects): tool arguments are always a JSON object.
/// The `$schema` key is removed and `$defs` are kept. A root without `type`
/// gets `"type": "object"` (providers require it); a root of another type is
/// kept as is, logged with `tracing::warn!`, and will reject every call.
pub fn tool_for<T: schemars::JsonSchema>(
    name: impl Into<String>,
    description: impl Into<String>,
) -> Tool {
    let name = name.into();
    let mut parameters = schemars::schema_for!(T).to_value();
    match parameters.as_object_mut() {
        Some(root) => {
            root.remove("$schema");
            match root.get("type") {
                None => {
                    root.insert("type".to_owned(), Value::String("object".to_owned()));
                }
                Some(Value::String(t)) if t == "object" => {}
                Some(other) => {
                    tracing::warn!(tool = %name, root_type = %other, "typed tool schema root is not an object");
                }
            }
        }
        None => {
            // `true` / `false` schemas: `true` accepts any object.
            tracing::warn!(tool = %name, "typed tool schema is a boolean schema");
            if parameters == Value::Bool(true) {
                parameters = serde_json::json!({ "type": "object" });
            }
        }
    }
    Tool { name, description: description.into(), parameters }
}

/// Arguments that do not deserialize into the tool's Rust type.
#[derive(Debug, thiserror::Error)]
#[error("Invalid arguments for tool \"{tool}\": {source}")]
pub struct ArgumentsError {
    /// The tool's name.
    pub tool: String,
    /// The deserialization error.
    #[source]
    pub source: serde_json::Error,
}

/// Deserializes (validated) arguments into `T`, with an error naming the tool.
///
/// Run [`crate::validation::ValidatorCache::validate`] first so that coercions
/// (`"3"` -> `3`) are applied and the model gets a schema-level message.
pub fn parse_arguments<T: DeserializeOwned>(
    tool_name: &str,
    arguments: &Value,
) -> Result<T, ArgumentsError> {
    T::deserialize(arguments)
        .map_err(|source| ArgumentsError { tool: tool_name.to_owned(), source })
}
