//! For provider authors: the toolkit a provider crate builds its wire format from.
//!
//! An application does not need this module; the crate root is its API (the data model, the
//! event protocol, options, errors, the `Provider` trait). What is here is how a provider
//! turns bytes into that model: framing a response body ([`sse`], [`framing`]), text fields
//! whose surrogate pairs a server split across events ([`wire_text`]), incremental JSON
//! ([`partial_json`]), events read by their bytes when only a fragment changed ([`template`]), the neutral [`Delta`]s a decoder emits and the [`MessageAssembler`]
//! that turns them into events, the request driver ([`drive`], feature `tokio`), OpenAI's
//! strict schemas ([`strict`]), and for tests a scripted provider ([`scripted`]) and the
//! one-line event printer of fixtures ([`printer`]). Small helpers for the per-chunk and
//! per-request paths: [`HotMap`] (a decoder's open blocks), [`first_element`] (the one array
//! element a chunk reads) and [`object`] (a request object built by moving its members in).

#[cfg(feature = "tokio")]
pub mod drive;
pub mod framing;
pub mod hot_map;
pub mod partial_json;
pub mod printer;
pub mod scripted;
pub mod sse;
pub mod strict;
pub mod template;
pub mod wire_text;

pub use crate::assembler::MessageAssembler;
pub use crate::error::{duration_from_secs, is_retryable_status, parse_retry_after};
pub use crate::event::{BlockKey, Delta};
pub use hot_map::HotMap;
pub use scripted::{ScriptedProvider, ScriptedTurn};
pub use template::{CHAT_ARGUMENTS, CHAT_CONTENT, EventTemplate, EventTemplates, Step};
pub use wire_text::{Channel, SurrogateJoiner, WireText, WireValue, replace_lone_surrogates};

/// A JSON object of `members` in order, their values moved in.
///
/// `serde_json::json!` serializes every value written into it again: a schema, a message's
/// content or a tool's result put into a request that way is copied whole, node by node, on
/// every request. Build those members with this instead.
pub fn object<const N: usize>(members: [(&str, serde_json::Value); N]) -> serde_json::Value {
    serde_json::Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Reads a JSON array (or `null`) and keeps its first element that `keep` accepts, without
/// collecting the elements into a vector: for the `choices` or `candidates` of a chunk, of
/// which one is read. Every element is still parsed, so one of an unexpected shape fails the
/// read as a vector's would.
pub fn first_element<'de, D, T>(d: D, keep: fn(&T) -> bool) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Elements<T> {
        keep: fn(&T) -> bool,
    }
    impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Elements<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array or null")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut first = None;
            while let Some(element) = seq.next_element::<T>()? {
                if first.is_none() && (self.keep)(&element) {
                    first = Some(element);
                }
            }
            Ok(first)
        }
    }
    d.deserialize_option(Elements { keep })
}
